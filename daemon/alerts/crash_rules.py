"""Which crash black-box events are alerts (``crash`` events, from ``daemon.evidence``).

A bundle is one-shot news (``EngineCrash``) carrying its verdict and its bundle id in the
labels, so the webhook says what triage found and where the evidence is. A recurring
fault's escalation is its own cause (``RecurringFault``, critical): said once, with the
memory-test advice. A boot whose KV pool shrank is ``KvPoolDrop`` (warning).
"""

from __future__ import annotations

from daemon.alerts.words import lock_screen
from daemon.store.alerts import AlertSignal
from daemon.store.events import EventRow
from hwcheck.model import Severity


def _label(value: object) -> str:
    return "" if value is None else str(value)


def crash_signals(event: EventRow) -> list[AlertSignal]:
    """The signals of one ``crash`` event."""
    details = event.details or {}
    kind = details.get("evidence")
    if kind == "bundle":
        return [
            AlertSignal(
                fingerprint=f"crash:{details.get('bundle_id')}",
                fire=True,
                rule="crash",
                severity=Severity.WARNING,
                summary=lock_screen(event.message),
                advice=f"{details.get('advice')} (fleetctl crash show {details.get('bundle_id')})",
                labels={
                    "alertname": "EngineCrash",
                    "bundle_id": _label(details.get("bundle_id")),
                    "verdict": _label(details.get("verdict")),
                    "confidence": _label(details.get("confidence")),
                    "crash_class": _label(details.get("crash_class") or details.get("fault")),
                },
                one_shot=True,
            )
        ]
    if kind == "escalation":
        return [
            AlertSignal(
                fingerprint=f"crash:recurring:{details.get('key')}:{details.get('bundle_id')}",
                fire=True,
                rule="crash_recurrence",
                severity=Severity.CRITICAL,
                summary=lock_screen(event.message),
                advice=str(details.get("advice") or ""),
                labels={
                    "alertname": "RecurringFault",
                    "bundle_id": _label(details.get("bundle_id")),
                    "verdict": _label(details.get("verdict")),
                    "group": _label(details.get("key")),
                },
                one_shot=True,
            )
        ]
    if kind == "kv_drop":
        return [
            AlertSignal(
                fingerprint="crash:kv_drop",
                fire=True,
                rule="boot_fingerprint",
                severity=Severity.WARNING,
                summary=lock_screen(event.message),
                advice="compare this boot with the last good one: the driver and kernel, each "
                "card's memory (nvidia-smi -q), the layer partition",
                labels={"alertname": "KvPoolDrop"},
                one_shot=True,
            )
        ]
    return []
