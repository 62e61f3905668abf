"""Which traffic-guard events are alerts (``guard`` events, from ``daemon.engine.guard``).

A guard process that exits or hangs fires ``GuardDown`` (warning: agents get errors until
it is back); its next start resolves it. A session crossing the leak or loop threshold is
one-shot news (``GuardSessionLeaks``, ``GuardSessionLoops``): the engine is leaking tool
calls or reasoning, or looping, in live traffic. A session past the depth threshold is
``GuardSessionDeep`` (info-level advice: compact or start fresh).
"""

from __future__ import annotations

from daemon.store.alerts import AlertSignal
from daemon.store.events import EventRow
from hwcheck.model import Severity

ADVICE = {
    "leaks": "Check the parser flags and patches (fleetctl canary status, tool_calls and "
    "reasoning_field); the agent should start a fresh session, its history is poisoned.",
    "loops": "The model is looping in live traffic: cap the context ([guard] "
    "max_context_tokens), pin reasoning_effort, start a fresh session.",
    "depth": "The session is past the depth where these builds loop: compact it or start a "
    "new session ([guard] max_context_tokens refuses past the cap).",
}
NAMES = {"leaks": "GuardSessionLeaks", "loops": "GuardSessionLoops", "depth": "GuardSessionDeep"}


def guard_signals(event: EventRow) -> list[AlertSignal]:
    """The signals of one ``guard`` event."""
    details = event.details or {}
    kind = str(details.get("guard", ""))
    if kind == "started":
        return [AlertSignal("guard:down", fire=False)]
    if kind in ("exited", "hung"):
        return [
            AlertSignal(
                fingerprint="guard:down",
                fire=True,
                rule="guard",
                severity=Severity.WARNING,
                summary=f"Traffic guard down: {event.message}",
                advice="fleetd restarts it with backoff; if it keeps exiting read "
                "`journalctl -u fleetd` for the guard's last lines.",
                labels={"alertname": "GuardDown"},
            )
        ]
    if kind in ADVICE:
        return [
            AlertSignal(
                fingerprint=f"guard:{kind}:{details.get('session')}",
                fire=True,
                rule="guard",
                severity=Severity.INFO if kind == "depth" else Severity.WARNING,
                summary=event.message.removeprefix("guard: "),
                advice=ADVICE[kind],
                labels={"alertname": NAMES[kind], "key": str(details.get("key", ""))},
                one_shot=True,
            )
        ]
    return []
