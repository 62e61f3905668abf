"""Which events and states are alerts: pure functions from facts to fire/resolve signals.

Every rule reads an event's typed facts (``event_facts``: the enums its writer stored),
never a word matched in its message. Every alert has a stable fingerprint (the same trouble on the same card is the same
alert, so repeats fold), a severity, a summary meant for a phone's lock screen, and the
advice: the next step. Sources:

- Xid events, one alert per card and Xid class (``xid:<class>:<card>``); they resolve at
  the next reboot, application-class ones also when the engine is ready again.
- Check transitions (``check:<id>:<card|rig>``): VRAM relocked, power brake, power cap
  drift, thermal, NVML unavailable, kernel-log follower down, card lost...; warning or
  critical fires, ok resolves. ``xid_since_boot`` is left to the Xid events themselves,
  and a result the check has not confirmed yet (the brake in 1 of 3 samples) fires
  nothing: the confirmed one does, so a warning is not followed by its critical a
  second later.
- Serving events: engine crashed, held by the breaker, stop stuck; ready again resolves.
  The engine's own metrics against their 24 h median (``engine_metric:<metric>``):
  speculative decoding's acceptance collapsed, time to first token tripled.
- Recovery events, when they are news (``recovery_rules``): a refused automatic start,
  a cap that could not be applied; never what alerts on its own or a person's own request.
- Canary events: a canary's verdict turned warn or fail fires ``canary:<name>``; pass resolves.
- Guard events (``daemon.alerts.guard_rules``): the guard process down; sessions leaking,
  looping or too deep in live traffic.
- State: the reboot-required latch (fires while set; its advice changing, a warm reboot
  become a cold power cycle, fires again: news), and a fleetd that finds its previous run
  never stopped cleanly (one-shot).

Every summary fits a lock screen (``words.lock_screen``). Symptoms of a firing cause fold
into it (``inhibit``).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from daemon.alerts.crash_rules import crash_signals
from daemon.alerts.event_facts import CheckFacts, EngineMetricFacts, ServingFacts, XidFacts
from daemon.alerts.guard_rules import guard_signals
from daemon.alerts.recovery_rules import recovery_signals
from daemon.alerts.words import lock_screen
from daemon.store.alerts import AlertSignal
from daemon.store.events import EventRow
from daemon.store.keyvalue import Latch
from hwcheck.advice import ACTION_STEPS, RigNow
from hwcheck.checks import CHECKS
from hwcheck.model import Advice, EventKind, Severity
from serving.runtime.states import ServingChange, ServingState

ADVICE_UNCLEAN = (
    "Nothing is lost, but find out why: `journalctl -u fleetd -b -1` (OOM, crash, power)."
)
# Each check's alert name and title (its ``SPEC.alert``): a noun, to which the summary adds
# " on card N" (never a title ending in "on": "Power brake on on card 0").
CHECK_TITLES = {
    spec.id: (spec.alert.name, spec.alert.title) for spec in CHECKS if spec.alert is not None
}
# Left to their own events: Xids alert per Xid, the canaries per canary (``canary:<name>``).
SKIPPED_CHECKS = frozenset(spec.id for spec in CHECKS if spec.alert is None)
ENGINE_ADVICE = {
    "crash": "fleetd restarts it with backoff; if it keeps crashing read `fleetctl logs`.",
    "held": "Restarts are on hold: read `fleetctl logs`, fix the cause, then `fleetctl start`.",
    "stop_stuck": "The engine will not stop: reboot the host. Never kill -9 its GPU workers.",
}
_PROBLEM = (Severity.WARNING, Severity.CRITICAL)


def _camel(word: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", word) if part)


def _sentence(text: str) -> str:
    """An advice line of the one table, as an alert reads it: capital first, full stop."""
    return text[:1].upper() + text[1:].rstrip(".") + "."


# An alert is read after recovery acted: a fault that latches has stopped the engine
# (its step says so), one that does not has left it running or restarting.
_AFTER_RECOVERY = {True: RigNow(engine_running=False, latched=True), False: RigNow()}


def _where(event: EventRow) -> str:
    """The card an event is about, for a fingerprint: PCI address, else index, else rig."""
    if event.pci_bus_id:
        return event.pci_bus_id
    return "rig" if event.card is None else f"card{event.card}"


def _card_labels(event: EventRow) -> dict[str, Any]:
    """The card's labels as ``/metrics`` names them (``gpu``, ``uuid``, ``pci_bus_id``).

    ``card`` (the same index as ``gpu``) stays for receivers written against schema 1.
    """
    labels: dict[str, Any] = {}
    if event.card is not None:
        labels["gpu"] = event.card
        labels["card"] = event.card
    if event.card_uuid:
        labels["uuid"] = event.card_uuid
    if event.pci_bus_id:
        labels["pci_bus_id"] = event.pci_bus_id
    if event.card_serial:
        labels["serial"] = event.card_serial
    return labels


# "card 2 (0000:41:00.0): " at the head of a check's message: the summary says the card.
_CARD_PREFIX = re.compile(r"^card \d+ \([0-9a-f:.]+\): ")


def _card_words(event: EventRow) -> str:
    return "rig" if event.card is None else f"card {event.card}"


# The latch's step first, so a summary cut at the lock screen's length keeps what to do.
LATCH_HEADS = {
    Advice.WARM_REBOOT: "Reboot required",
    Advice.COLD_POWER_CYCLE: "Cold power cycle required (a warm reboot did not help)",
    Advice.TAKE_CARD_OUT: "Take the card out (no reboot helped)",
}


def latch_advice(latch: Latch) -> str:
    """The latch's step, as an alert reads it (the engine stopped, the latch set)."""
    return _sentence(latch.advice_text(engine_running=False))


def xid_signals(event: EventRow, latch: Latch | None = None) -> list[AlertSignal]:
    """An Xid: one alert per card and class (more of the same fold into it).

    One that latches advises what the latch in force asks (a cold power cycle once a warm
    reboot did not help), else its catalogue entry's step.
    """
    facts = XidFacts.of(event)
    info = facts.info
    xid_class = info.xid_class.value
    severity = event.severity if event.severity in _PROBLEM else Severity.WARNING
    advice = _sentence(ACTION_STEPS[info.action].text(_AFTER_RECOVERY[info.latches]))
    if info.latches and latch is not None:
        advice = latch_advice(latch)
    return [
        AlertSignal(
            fingerprint=f"xid:{xid_class}:{_where(event)}",
            fire=True,
            rule="xid",
            severity=severity,
            # The headline (the event's message) and one step: never the explanation.
            summary=lock_screen(
                f"Xid {event.xid} ({facts.title or xid_class}) on {_card_words(event)}"
            ),
            advice=advice,
            labels={
                "alertname": f"Xid{_camel(xid_class)}",
                "xid": event.xid,
                "xid_class": xid_class,
                **_card_labels(event),
            },
        )
    ]


def check_signals(event: EventRow) -> list[AlertSignal]:
    """A check changed severity: warning/critical fires its alert, ok resolves it."""
    facts = CheckFacts.of(event)
    check = facts.check
    if check is None or check in SKIPPED_CHECKS:
        return []
    fingerprint = f"check:{check}:{'rig' if event.card is None else event.card}"
    if event.severity not in _PROBLEM:
        return [AlertSignal(fingerprint, fire=False)]
    if not facts.confirmed:
        return []  # seen too briefly to call: the confirmed result (often critical) alerts
    name, title = CHECK_TITLES.get(check, (f"Check{_camel(check)}", check.replace("_", " ")))
    message = event.message.split(": ", 1)[-1]  # past "<id> <before> -> <after>: "
    message = _CARD_PREFIX.sub("", message)
    where = "" if event.card is None else f" on card {event.card}"
    return [
        AlertSignal(
            fingerprint=fingerprint,
            fire=True,
            rule="check",
            severity=event.severity,
            summary=lock_screen(f"{title}{where}: {message}"),
            advice=facts.remedy or "See `fleetctl status`.",
            labels={"alertname": name, "check": check, **_card_labels(event)},
        )
    ]


def _engine(
    kind: str, name: str, title: str, event: EventRow, facts: ServingFacts, severity: Severity
) -> AlertSignal:
    return AlertSignal(
        fingerprint=f"engine:{kind}",
        fire=True,
        rule="engine",
        severity=severity,
        summary=lock_screen(f"{title}: {event.message}"),
        advice=facts.advice or ENGINE_ADVICE[kind],
        labels={"alertname": name, "state": "" if facts.state is None else facts.state.value},
    )


ENGINE_METRIC_TITLES = {
    "spec_acceptance": ("SpecAcceptanceCollapsed", "Speculative decoding acceptance collapsed"),
    "ttft_p95": ("TtftSlow", "Time to first token slowed"),
}


def engine_metric_signals(event: EventRow) -> list[AlertSignal]:
    """An engine metric alarm started (fires ``engine_metric:<metric>``) or ended (resolves)."""
    facts = EngineMetricFacts.of(event)
    metric = facts.metric
    fingerprint = f"engine_metric:{metric}"
    if not facts.firing:
        return [AlertSignal(fingerprint, fire=False)]
    name, title = ENGINE_METRIC_TITLES.get(metric, (f"Engine{_camel(metric)}", metric))
    return [
        AlertSignal(
            fingerprint=fingerprint,
            fire=True,
            rule="engine_metric",
            severity=Severity.WARNING,
            summary=lock_screen(f"{title}: {event.message.split(': ', 1)[-1]}"),
            advice=facts.advice or "See `fleetctl status --json` (serving.metrics).",
            labels={"alertname": name, "metric": metric},
        )
    ]


def serving_signals(event: EventRow) -> list[AlertSignal]:
    """Engine crashed, held, stop stuck (fire); ready again or stopped (resolve)."""
    facts = ServingFacts.of(event)
    change, state = facts.change, facts.state
    if change is ServingChange.ENGINE_METRIC:
        return engine_metric_signals(event)
    if change is ServingChange.STOP_STUCK:
        return [
            _engine(
                "stop_stuck",
                "EngineStopStuck",
                "Engine stop stuck",
                event,
                facts,
                Severity.CRITICAL,
            )
        ]
    if change is ServingChange.BREAKER or (
        change is ServingChange.STATE and state is ServingState.HELD
    ):
        return [_engine("held", "EngineHeld", "Engine held", event, facts, Severity.CRITICAL)]
    if change is ServingChange.CRASH:
        severity = event.severity if event.severity in _PROBLEM else Severity.WARNING
        return [_engine("crash", "EngineCrashed", "Engine crashed", event, facts, severity)]
    if change is ServingChange.STATE and state is ServingState.READY:
        return [
            AlertSignal("engine:", fire=False, prefix=True),
            AlertSignal("xid:application:", fire=False, prefix=True),
        ]
    if change is ServingChange.STATE and state is ServingState.STOPPED:
        return [AlertSignal("engine:stop_stuck", fire=False)]
    return []


def canary_signals(event: EventRow) -> list[AlertSignal]:
    """An engine canary's verdict changed: warn/fail fires ``canary:<name>``, pass resolves."""
    details = event.details or {}
    name = str(details.get("canary", ""))
    if not name:
        return []
    fingerprint = f"canary:{name}"
    if event.severity not in _PROBLEM:
        return [AlertSignal(fingerprint, fire=False)]
    return [
        AlertSignal(
            fingerprint=fingerprint,
            fire=True,
            rule="canary",
            severity=event.severity,
            summary=lock_screen(f"Engine {event.message}"),  # "canary <name>: fail (was pass)"
            advice=str(details.get("advice") or "See `fleetctl canary status`."),
            labels={"alertname": f"Canary{_camel(name)}", "canary": name},
        )
    ]


def event_signals(event: EventRow, latch: Latch | None = None) -> list[AlertSignal]:
    """Every signal one stored event gives (``latch``: the one in force now)."""
    if event.kind is EventKind.XID:
        return xid_signals(event, latch)
    if event.kind is EventKind.CHECK:
        return check_signals(event)
    if event.kind is EventKind.SERVING:
        return serving_signals(event)
    if event.kind is EventKind.RECOVERY:
        return recovery_signals(event)
    if event.kind is EventKind.CANARY:
        return canary_signals(event)
    if event.kind is EventKind.GUARD:
        return guard_signals(event)
    if event.kind is EventKind.CRASH:
        return crash_signals(event)
    if event.is_new_boot:
        return [
            AlertSignal("xid:", fire=False, prefix=True),
            AlertSignal("engine:stop_stuck", fire=False),
        ]
    return []


def latch_signal(latch: Latch | None) -> AlertSignal:
    """The reboot-required latch: fires while set, resolves once cleared.

    Its advice follows the latch: a latch whose advice changed (the escalation to a cold
    power cycle) fires again with the new advice, which the store sends as news.
    """
    if latch is None:
        return AlertSignal("reboot_required", fire=False)
    return AlertSignal(
        fingerprint="reboot_required",
        fire=True,
        rule="reboot_required",
        severity=Severity.CRITICAL,
        summary=lock_screen(f"{LATCH_HEADS[latch.advice]}: {latch.reason}"),
        advice=latch_advice(latch),
        labels={"alertname": "RebootRequired", "latch_source": latch.source},
    )


def latched_xid_advice(latch: Latch) -> AlertSignal:
    """The open latching Xid alerts (critical) take the latch's advice, quietly."""
    return AlertSignal(
        "xid:",
        fire=True,
        prefix=True,
        amend=True,
        severity=Severity.CRITICAL,
        advice=latch_advice(latch),
    )


def unclean_stop_signal(previous: dict[str, Any], now: datetime) -> AlertSignal:
    """fleetd found the marker of a run that never stopped cleanly."""
    pid, since = previous.get("pid", "?"), previous.get("since", "?")
    return AlertSignal(
        fingerprint=f"daemon:unclean_stop:{now.isoformat()}",
        fire=True,
        rule="daemon",
        severity=Severity.WARNING,
        summary=lock_screen(
            f"fleetd restarted after an unclean stop: pid {pid} (up since {since}) was "
            "killed, crashed or lost power"
        ),
        advice=ADVICE_UNCLEAN,
        labels={"alertname": "DaemonUncleanStop"},
        one_shot=True,
    )
