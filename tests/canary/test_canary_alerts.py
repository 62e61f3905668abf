"""A canary's verdict change is an alert: warn/fail fires ``canary:<name>``, pass resolves."""

from __future__ import annotations

from datetime import UTC, datetime

from daemon.alerts.rules import event_signals
from daemon.store.events import EventRow
from hwcheck.model import EventKind, Severity

T0 = datetime(2026, 12, 3, 7, 0, tzinfo=UTC)


def canary_event(severity: Severity, result: str, message: str) -> EventRow:
    details = {"canary": "copy_fidelity", "result": result, "advice": "token corruption..."}
    return EventRow(
        id=7, ts=T0, kind=EventKind.CANARY, severity=severity, message=message, details=details
    )


def test_a_failing_canary_fires_and_a_passing_one_resolves() -> None:
    message = "canary copy_fidelity: fail (was pass): 32/40 identifiers copied exactly"
    (fired,) = event_signals(canary_event(Severity.CRITICAL, "fail", message))
    assert fired.fire and fired.fingerprint == "canary:copy_fidelity"
    assert fired.severity is Severity.CRITICAL
    assert fired.summary == f"Engine {message}"
    assert fired.advice == "token corruption..."
    assert fired.labels == {"alertname": "CanaryCopyFidelity", "canary": "copy_fidelity"}
    (resolved,) = event_signals(canary_event(Severity.INFO, "pass", "canary copy_fidelity: pass"))
    assert not resolved.fire and resolved.fingerprint == "canary:copy_fidelity"
