"""The daemon's side of recovery's ports: the latch, the audit trail, the rig, a document.

``recovery.controller`` does no I/O of its own; these small adapters give it the store
(latch, audit rows with their events, the fault history document) and the monitor (the
rig now, the last probe round and a person's waiver for the checks). Each is one job, so
the wiring only plugs them in.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from daemon import fault_points
from daemon.ports.latch import LatchState
from daemon.rig.monitor import RigMonitor
from daemon.store import AuditRow, Store, StoreError
from daemon.store.keyvalue import LATCH_WAIVER
from hwcheck.cuda_results import ProbeRound
from hwcheck.model import (
    Advice,
    CheckResult,
    ClassifiedXid,
    EventKind,
    GpuSnapshot,
    LatchWaiver,
    Severity,
)
from recovery.actions import SHOWN_IN_STATUS, Action, severity_of
from recovery.decisions import Reason
from recovery.facts import LatchFact

log = logging.getLogger("fleetd.recovery")

# Audit actions that are recovery's (shown as the last decisions in the status).
RECOVERY_ACTIONS = SHOWN_IN_STATUS
KEPT_IN_MEMORY = 50  # audit rows the status can show while the store cannot be read


class RecoveryMemory:
    """What the checks need of recovery between polls: the last probe round, the waiver.

    The waiver (a person's clear of the latch) lasts for its boot and survives a fleetd
    restart (kept in the store); a new boot forgets both.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._probes: ProbeRound | None = None
        self._waiver: LatchWaiver | None = None
        self._waiver_boot = ""
        # A fleet.db started afresh has lost the waiver: without it the Xids read again
        # into it would make the next start latch on faults a person already cleared.
        store.add_fresh_listener(self._store_waiver_again)

    def load(self, boot_id: str) -> None:
        """This boot's waiver, if a person cleared the latch before fleetd restarted."""
        document = self._store.get_document(LATCH_WAIVER) or {}
        waiver = None
        if document.get("boot_id") == boot_id:
            try:
                waiver = LatchWaiver(
                    reason=str(document["reason"]),
                    at=datetime.fromisoformat(str(document["at"])),
                    xid_keys=frozenset(str(key) for key in document.get("xid_keys", [])),
                )
            except (KeyError, ValueError):
                log.warning("the stored latch waiver is unreadable: ignored")
        with self._lock:
            self._waiver = waiver
            self._waiver_boot = boot_id

    def new_boot(self) -> None:
        """A reboot: no probe of this boot yet, nothing waived."""
        with self._lock:
            self._probes = None
            self._waiver = None

    def note_probes(self, probes: ProbeRound) -> None:
        """The last probe round (the ``cuda_probe`` check judges it)."""
        with self._lock:
            self._probes = probes

    def set_waiver(self, waiver: LatchWaiver, boot_id: str) -> None:
        """A person cleared the latch: keep what it waives (memory first, then the store)."""
        with self._lock:
            self._waiver = waiver
            self._waiver_boot = boot_id
        self._write_waiver(waiver, boot_id)

    def _store_waiver_again(self) -> None:
        with self._lock:
            waiver, boot_id = self._waiver, self._waiver_boot
        if waiver is not None:
            self._write_waiver(waiver, boot_id)

    def _write_waiver(self, waiver: LatchWaiver, boot_id: str) -> None:
        document = {
            "boot_id": boot_id,
            "reason": waiver.reason,
            "at": waiver.at.isoformat(),
            "xid_keys": sorted(waiver.xid_keys),
        }
        try:
            self._store.set_document(LATCH_WAIVER, document)
        except Exception:
            log.exception("the latch waiver was not stored (it holds until fleetd restarts)")

    @property
    def probes(self) -> ProbeRound | None:
        """The last probe round of this boot."""
        with self._lock:
            return self._probes

    @property
    def waiver(self) -> LatchWaiver | None:
        """This boot's waiver."""
        with self._lock:
            return self._waiver


class StoreLatch:
    """``LatchPort`` on the latch in force (``daemon.ports.latch``); its listeners react.

    A set or clear tells each change listener at once (``required``): the rig's verdict
    (``RigJudge.latch_changed``) and the alert engine (``AlertEngine.latch_changed``)
    subscribe where fleetd builds them.

    Acting comes first: the latch is set in memory and its state file at once, and the
    store catches up through ``defer`` (the store writer), so a locked, full or corrupt
    store never delays the stop that follows (issue 22).
    """

    def __init__(
        self,
        state: LatchState,
        memory: RecoveryMemory,
        boot_id: Callable[[], str],
        defer: Callable[[Callable[[], None]], None],
    ) -> None:
        self._state = state
        self._memory = memory
        self._boot_id = boot_id
        self._listeners: list[Callable[[bool], None]] = []
        self._defer = defer

    def add_change_listener(self, listener: Callable[[bool], None]) -> None:
        """Call ``listener(required)`` after each set or clear (on the caller's thread)."""
        self._listeners.append(listener)

    def _changed(self, required: bool) -> None:
        for listener in self._listeners:
            listener(required)

    def latch(self) -> LatchFact | None:
        """The latch in force (this process's, or one another process stored)."""
        latch = self._state.latch()
        return None if latch is None else LatchFact(latch.reason, latch.advice, latch.card)

    def set_latch(self, reason: str, advice: Advice, card: int | None = None) -> None:
        """Set it (a second fault keeps the first reason and time); the store after."""
        self._state.set(reason, "recovery", advice, card)
        fault_points.reached(fault_points.LATCH_SET)
        self._changed(True)
        self._defer(self._state.catch_up)

    def clear_latch(self, reason: str, by: str, waiver: LatchWaiver) -> bool:
        """The operator override, recorded as an event, and its waiver; False when unset."""
        cleared = self._state.clear(reason, by, "operator")
        self._memory.set_waiver(waiver, self._boot_id())
        self._changed(False)
        return cleared


class StoreAudit:
    """``AuditTrail`` on the store: one audit row and one event per record.

    The last rows are also kept in memory, so the status still shows recovery's last
    decisions while the store cannot be read (``last``).
    """

    def __init__(self, store: Store, dry_run: bool) -> None:
        self._store = store
        self._dry_run = dry_run
        self._recent: deque[AuditRow] = deque(maxlen=KEPT_IN_MEMORY)
        self._lock = threading.Lock()

    def last(self, limit: int) -> list[AuditRow]:
        """The newest rows first: the store's, else (the store is sick) those kept here."""
        try:
            return self._store.list_audit(limit=limit)
        except StoreError as exc:
            log.warning("the audit trail could not be read (%s): the rows in memory", exc)
        with self._lock:
            return list(reversed(self._recent))[:limit]

    def record(
        self,
        actor: str,
        action: Action,
        reason: str,
        result: str,
        warnings: tuple[str, ...] = (),
        reasons: tuple[Reason, ...] = (),
    ) -> None:
        """Append the row and its ``recovery`` event (never raises: logged instead).

        The event's details carry the reasons' ``codes`` and the first ``remedy``: the
        alert rules tell from the codes what alerts on its own, and advise the remedy.
        """
        if action == Action.STOP_AND_LATCH:
            fault_points.reached(fault_points.DECISION_RECORDING)
        dry_run = self._dry_run and result.startswith("dry run")
        severity = severity_of(action, bool(warnings))
        log.log(
            logging.WARNING if severity.rank > Severity.INFO.rank else logging.INFO,
            "recovery %s by %s: %s -> %s",
            action,
            actor,
            reason,
            result,
        )
        details: dict[str, Any] = {
            "actor": actor,
            "action": action,
            "result": result,
            "dry_run": dry_run,
        }
        if warnings:
            details["warnings"] = list(warnings)
        if reasons:
            details["codes"] = [r.code for r in reasons]
            details["first"] = reasons[0].message
            remedy = next((r.remedy for r in reasons if r.remedy), "")
            if remedy:
                details["remedy"] = remedy
        with self._lock:
            self._recent.append(
                AuditRow(-1, datetime.now(UTC), actor, action, None, reason, dry_run, result, None)
            )
        try:
            self._store.audit(actor, action, result, reason=reason, dry_run=dry_run)
            self._store.record_event(
                EventKind.RECOVERY,
                severity,
                f"{action.replace('_', ' ')}: {reason} ({result})",
                details=details,
            )
        except Exception:
            log.exception("could not record the recovery decision %s", action)


class StoreDocument:
    """``DocumentStore`` on one key of the store (recovery's card fault history).

    ``save`` goes through ``defer`` (the store writer): recovery notes a card's fault
    while it latches, and a locked database must not hold the stop back.
    """

    def __init__(self, store: Store, key: str, defer: Callable[[Callable[[], None]], None]) -> None:
        self._store = store
        self._key = key
        self._defer = defer

    def load(self) -> dict[str, Any] | None:
        """The document, or None."""
        return self._store.get_document(self._key)

    def save(self, document: dict[str, Any]) -> None:
        """Replace it (on the store writer's thread)."""
        self._defer(lambda: self._store.set_document(self._key, document))


class MonitorRig:
    """``RigView`` on the monitor; ``rejudge`` runs a poll now (checks on fresh readings)."""

    def __init__(
        self, monitor: RigMonitor, memory: RecoveryMemory, rejudge: Callable[[], None]
    ) -> None:
        self._monitor = monitor
        self._memory = memory
        self._rejudge = rejudge

    def results(self) -> tuple[CheckResult, ...]:
        """The check results of the last poll."""
        return self._monitor.view().results

    def cards(self) -> tuple[GpuSnapshot, ...]:
        """The cards of the last poll."""
        latest = self._monitor.view().latest
        return () if latest is None else latest.cards

    def xids(self) -> tuple[ClassifiedXid, ...]:
        """This boot's Xids."""
        return self._monitor.xids()

    def note_probes(self, probes: ProbeRound) -> None:
        """Keep the round for the ``cuda_probe`` check."""
        self._memory.note_probes(probes)

    def rejudge(self) -> None:
        """A poll now (never raises: the next poll tries again)."""
        try:
            self._rejudge()
        except Exception:
            log.exception("the checks could not be run again now; the next poll will")
