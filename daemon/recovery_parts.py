"""The daemon's side of recovery's protocols: the latch, the audit trail, the engine.

``recovery.executors`` does no I/O of its own; these small adapters give it the store
(latch, audit rows with their events) and the engine service (a clean stop, a start).
Each is one job, so the recovery service only wires them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from daemon.store import Store
from hwcheck.model import EventKind, Severity
from serving.runtime.states import ServingState, StartRefused, SupervisorClosed

log = logging.getLogger("fleetd.recovery")

# Audit actions that are recovery's (shown as the last decisions in the status).
RECOVERY_ACTIONS = frozenset(
    {
        "stop_and_latch",
        "restart_after",
        "start",
        "hold",
        "refuse",
        "advise_inspection",
        "none",
        "reboot",
        "clear_latch",
        "bring_up",
        "probe",
    }
)
_SEVERITY_OF_ACTION = {
    "stop_and_latch": Severity.CRITICAL,
    "hold": Severity.CRITICAL,
    "advise_inspection": Severity.WARNING,
    "refuse": Severity.WARNING,
    "restart_after": Severity.WARNING,
}


class StoreLatch:
    """``LatchControl`` on the store's durable latch."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def set_latch(self, reason: str, advice: str) -> None:
        """Set it (a second fault keeps the first reason and time)."""
        self._store.set_latch(reason, source="recovery", advice=advice)

    def clear_latch(self, reason: str, by: str) -> bool:
        """The operator override, recorded as an event; False when it was not set."""
        return self._store.clear_latch(reason, by, "operator") is not None

    def reason(self) -> str | None:
        """Why a reboot is required now, or None."""
        latch = self._store.get_latch()
        return None if latch is None else latch.reason


class StoreAudit:
    """``AuditTrail`` on the store: one audit row and one event per record."""

    def __init__(self, store: Store, dry_run: bool) -> None:
        self._store = store
        self._dry_run = dry_run

    def record(self, actor: str, action: str, reason: str, result: str) -> None:
        """Append the row and its ``recovery`` event (never raises: logged instead)."""
        dry_run = self._dry_run and result.startswith("dry run")
        severity = _SEVERITY_OF_ACTION.get(action, Severity.INFO)
        log.log(
            logging.WARNING if severity.rank > Severity.INFO.rank else logging.INFO,
            "recovery %s by %s: %s -> %s",
            action,
            actor,
            reason,
            result,
        )
        try:
            self._store.audit(actor, action, result, reason=reason, dry_run=dry_run)
            self._store.record_event(
                EventKind.RECOVERY,
                severity,
                f"{action.replace('_', ' ')}: {reason} ({result})",
                details={"actor": actor, "action": action, "result": result, "dry_run": dry_run},
            )
        except Exception:
            log.exception("could not record the recovery decision %s", action)


@dataclass
class EngineDriver:
    """``EngineControl`` on the engine service; a rig without an engine has nothing to do.

    ``hold`` and ``restart_after`` only come from an engine exit, whose verdict goes back
    to the supervisor directly (``RecoveryService.advise_exit``): here they are recorded.
    """

    stop: Callable[[str], ServingState] | None
    start_engine: Callable[[str], Any] | None
    last_start_error: str | None = None

    def stop_cleanly(self, reason: str) -> bool:
        """Graceful stop (SIGKILL only with ``allow_kill``); True when it stopped."""
        if self.stop is None:
            return True
        try:
            state = self.stop(reason)
        except SupervisorClosed:
            return False
        return state is ServingState.STOPPED

    def start(self, reason: str) -> None:
        """Start the engine; a refusal is logged (the start gate said why)."""
        self.last_start_error = None
        if self.start_engine is None:
            self.last_start_error = "no engine is configured"
            return
        try:
            self.start_engine(reason)
        except StartRefused as exc:
            self.last_start_error = f"the start was refused: {exc}"
        except (SupervisorClosed, TimeoutError) as exc:
            self.last_start_error = f"the start did not finish: {exc or 'timed out'}"
        if self.last_start_error is not None:
            log.warning("engine not started (%s): %s", reason, self.last_start_error)

    def hold(self, reason: str) -> None:
        """Only from an exit verdict; nothing to do here."""
        log.info("hold decided: %s", reason)

    def restart_after(self, delay_s: float, reason: str) -> None:
        """Only from an exit verdict; nothing to do here."""
        log.info("restart in %g s decided: %s", delay_s, reason)
