"""Which recovery events are news for a person's phone, and how they read there.

Recovery records every decision (audit row and event). Of those, a webhook hears only
what nobody told the person yet:

- a start that went ahead "with warnings" alerts nothing when each warning alerts on its
  own (a check result, a foreign holder of the cards: ``SELF_ALERTING``), and nothing
  when a person asked for it (fleetctl printed the warnings to them);
- a refused start asked by a person is answered to that person (exit 4 and the reasons),
  not pushed to everyone's phone;
- a refused automatic start (autostart, the bring-up, the end of a backoff) is one
  ``EngineStartRefused`` alert, firing until the engine is ready, so a fleetd restart
  that is refused again adds nothing; none at all when its reasons alert on their own
  (the latch is ``RebootRequired``, a gating check its own alert);
- anything else of warning or worse (a cap that could not be set, a decision taken in
  dry run) is one-shot news.

Summaries name the cause in a line a lock screen shows; the advice is the cause's remedy.
"""

from __future__ import annotations

from typing import Any

from daemon.alerts.event_facts import RecoveryFacts
from daemon.alerts.words import lock_screen
from daemon.store.alerts import AlertSignal
from daemon.store.events import EventRow
from hwcheck.model import Severity
from recovery.actions import OWN_ALERT, REFUSALS, Action, refusal_code

_PROBLEM = (Severity.WARNING, Severity.CRITICAL)
# Recovery decisions (``details.action``) whose effect raises its own alert.
COVERED_RECOVERY_ACTIONS = OWN_ALERT
# Who acts without a person asking (audit actors); anyone else is a person.
AUTOMATIC_ACTORS = frozenset({"recovery", "fleetd"})
# Reason codes whose cause alerts on its own: check results (their check alert), foreign
# holders of the cards (``foreign_gpu_processes``), the latch (``RebootRequired``).
SELF_ALERTING = frozenset(code for code, row in REFUSALS.items() if row.own_alert)
ACTION_ADVICE: dict[str, str] = {
    "apply_power_cap": (
        "Run fleetd as root (setting a power limit needs it) or set [rig] power_cap_w within "
        "the card's range, then fleetctl caps apply."
    ),
    Action.ADVISE_INSPECTION: (
        "Inspect the card the summary names (fleetctl status shows its checks)."
    ),
}
DEFAULT_ADVICE = "Do what the summary's cause needs; fleetctl status shows each check's fix."


def _card_words(event: EventRow) -> str:
    return "rig" if event.card is None else f"card {event.card}"


def _own_alerts(facts: RecoveryFacts) -> bool:
    """True when every reason recorded alerts on its own (no codes: unknown, so no)."""
    codes = [refusal_code(code) for code in facts.codes]
    return bool(codes) and all(code is not None and code in SELF_ALERTING for code in codes)


def _action(name: str | None) -> Action | None:
    """The recorded action as recovery's member (None: none, or not recovery's)."""
    try:
        return Action(name or "")
    except ValueError:
        return None


def _advice(facts: RecoveryFacts) -> str:
    found = facts.advice or ACTION_ADVICE.get(facts.action or "")
    if not found:
        return DEFAULT_ADVICE
    return found[:1].upper() + found[1:].rstrip(".") + "."


def _labels(event: EventRow, name: str) -> dict[str, Any]:
    labels: dict[str, Any] = {"alertname": name}
    if event.card is not None:
        labels.update(gpu=event.card, card=event.card)
    if event.card_uuid:
        labels["uuid"] = event.card_uuid
    if event.pci_bus_id:
        labels["pci_bus_id"] = event.pci_bus_id
    return labels


def recovery_signals(event: EventRow) -> list[AlertSignal]:
    """A recovery event of warning or worse, when it is news (see the module's list)."""
    facts = RecoveryFacts.of(event)
    if event.severity not in _PROBLEM:
        return []
    action = _action(facts.action)
    if action in COVERED_RECOVERY_ACTIONS and not facts.dry_run:
        return []
    person = facts.actor is not None and facts.actor not in AUTOMATIC_ACTORS
    result = facts.result or ""
    first = facts.first or event.message
    if action is Action.START and result.startswith("done"):  # it started, with warnings
        if person or _own_alerts(facts):
            return []
        summary = lock_screen(f"Engine started with warnings: {first}")
    elif action is Action.REFUSE or result.startswith("refused"):
        if person or _own_alerts(facts):
            return []
        return [
            AlertSignal(
                fingerprint="engine:start_refused",
                fire=True,
                rule="engine",
                severity=event.severity,
                summary=lock_screen(f"Engine not started: {first}"),
                advice=_advice(facts),
                labels=_labels(event, "EngineStartRefused"),
            )
        ]
    else:
        summary = lock_screen(f"Recovery on {_card_words(event)}: {event.message}")
    return [
        AlertSignal(
            fingerprint=f"recovery:{event.id}",
            fire=True,
            rule="recovery",
            severity=event.severity,
            summary=summary,
            advice=_advice(facts),
            labels=_labels(event, "Recovery"),
            one_shot=True,
        )
    ]
