"""The daemon's implementation of ``web.services.WebServices``: what the API can ask of fleetd.

Named ``api_services`` so it is not mistaken for ``web/services.py`` (the protocol it
implements). Reads come from the monitor's in-memory view and the store; nothing here
calls NVML except ``apply_caps``, which must read the cards it is about to change.
Refusals are ``serving.errors`` classes; the web layer gives them their status codes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, Protocol, overload

from daemon.canaries.runner import not_run_entry
from daemon.engine.actions import refusal_document, start_document
from daemon.engine.fleet import SideEngine, SideEngines
from daemon.ports.parts import RECOVERY_ACTIONS
from daemon.rig.caps import CapKeeper
from daemon.rig.history_cache import HistoryCache
from daemon.rig.host_watch import HostWatch
from daemon.rig.monitor import RigMonitor
from daemon.rig.status_document import status_document
from daemon.rig.xidpath import FollowerThread
from daemon.store import AuditRow, Latch, Store
from daemon.store.xids import kernel_time_of
from hwcheck.backend import BackendError, GpuBackend
from hwcheck.model import EventKind, RigProfile, Severity
from hwcheck.verdict import ENGINE_RUNNING_STATES
from recovery.facts import Trigger
from recovery.gate import WAY_OUT
from recovery.refusals import LastRefusal
from recovery.starts import StartAnswer
from recovery.stops import StopAnswer
from serving.canary.model import CANARY_NAMES
from serving.errors import Conflict, InvalidInput, NotFound, Unavailable
from web.models import (
    BringUpDocument,
    EngineDocument,
    EventDocument,
    RecipeDocument,
    RecoveryDecisionDocument,
    RecoveryDocument,
    RefusalDocument,
    RefusedStartDocument,
    StatusDocument,
)
from web.models_drain import DrainDocument
from web.routes.canaries import CanaryControl
from web.services import EventQuery, SimulationControl


class EngineControl(Protocol):
    """The engine service (``daemon.engine.service``) as the daemon's services see it."""

    profile: str

    def status_document(self) -> dict[str, Any]:
        """The status's ``serving`` block (docs/reference.md "JSON documents")."""
        ...

    def stop_foreign_before_start(self, actor: str) -> list[dict[str, Any]]:
        """``--stop-foreign``: refused first if the gate refuses; else stop them, on record."""
        ...

    def switch(
        self, name: str, actor: str = "operator", stop_foreign: bool = False
    ) -> dict[str, Any]:
        """Stop cleanly, switch to profile ``name``, start it (``engine_switch``)."""
        ...

    def profiles_document(self) -> dict[str, Any]:
        """The launch profiles and their lint verdicts."""
        ...

    def logs(self, lines: int) -> list[str]:
        """The last lines of the engine log."""
        ...

    def follow(self, backlog: int) -> Iterator[str | None]:
        """Backlog then new log lines, until the reader goes away."""
        ...

    def recipe_document(self) -> RecipeDocument:
        """The spec the daemon would launch and its diff to the last ready launch."""
        ...

    def engine_pids(self) -> set[int]:
        """The engine's process tree (its GPU workers, or a container's processes)."""
        ...

    def close(self) -> None:
        """Stop supervising (the engine keeps running)."""
        ...


class StartStop(Protocol):
    """An engine's recovery controller as a person's start, stop or restart asks it."""

    def request_start(self, trigger: Trigger, actor: str, restart: bool) -> StartAnswer:
        """The one start path: one decision, carried out, the answer."""
        ...

    def request_stop(self, trigger: Trigger, actor: str, reason: str = "") -> StopAnswer:
        """The one stop path: one decision, carried out, the answer."""
        ...


class RecoveryControl(Protocol):
    """Recovery's controller (``recovery.controller``) as the API sees it."""

    dry_run: bool

    @property
    def last_bring_up(self) -> dict[str, Any] | None:
        """What the last bring-up did, or None."""
        ...

    @property
    def last_refused_start(self) -> LastRefusal | None:
        """The last start refused (every reason, with its code), until one is made."""
        ...

    def request_start(self, trigger: Trigger, actor: str, restart: bool) -> StartAnswer:
        """The one start path: one decision, carried out, the answer."""
        ...

    def request_stop(self, trigger: Trigger, actor: str, reason: str = "") -> StopAnswer:
        """The one stop path: one decision, carried out, the answer."""
        ...

    def reboot(self, confirm: bool, actor: str, cold: bool, force: bool) -> dict[str, Any]:
        """Explain, or stop cleanly then reboot (``cold``: power-cycle; ``force``: any entry)."""
        ...

    def clear(self, reason: str, actor: str) -> dict[str, Any]:
        """The operator override of the latch."""
        ...

    def power_cycle_available(self) -> bool:
        """True when ``reboot --confirm --cold`` can power-cycle (not only explain)."""
        ...

    def wrong_boot(self) -> str | None:
        """The default boot entry a confirmed reboot would refuse (None: fine)."""
        ...


LAST_DECISIONS = 10


def _utc(ts: datetime | None) -> datetime | None:
    """A time without an offset is read as UTC."""
    return ts.replace(tzinfo=UTC) if ts is not None and ts.tzinfo is None else ts


@overload
def iso(ts: datetime) -> str: ...
@overload
def iso(ts: None) -> None: ...
@overload
def iso(ts: datetime | None) -> str | None: ...
def iso(ts: datetime | None) -> str | None:
    """ISO 8601 with a UTC offset (docs/reference.md "Conventions")."""
    if ts is None:
        return None
    return (ts if ts.tzinfo else ts.replace(tzinfo=UTC)).isoformat()


class DaemonServices:
    """The daemon's answers to API requests, from the parts it is given (never the daemon)."""

    def __init__(
        self,
        store: Store,
        monitor: RigMonitor,
        engine: EngineControl | None,
        *,
        caps: CapKeeper,
        gpu: GpuBackend,
        follower: FollowerThread,
        token: str,
        loopback_only: bool,
        sim: SimulationControl | None,
        canaries: CanaryControl | None = None,
        recovery: RecoveryControl | None = None,
        rig: RigProfile | None = None,
        host_watch: HostWatch | None = None,
        latch_in_force: Callable[[], Latch | None] | None = None,
        audit_rows: Callable[[int], list[AuditRow]] | None = None,
        evidence: Callable[[], dict[str, Any]] | None = None,
        drain: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self._store = store
        self._evidence = evidence
        self.history_cache = HistoryCache(store)  # dropped after each rollup (rig.rollup_job)
        self._monitor = monitor
        self._engine = engine
        self._caps = caps
        self._gpu = gpu
        self._follower = follower
        self.token = token
        self.loopback_only = loopback_only
        self._sim = sim
        self.canaries = canaries
        self._recovery = recovery
        self._rig = rig or RigProfile()
        self._host_watch = host_watch
        self._started_at = datetime.now(UTC)
        # From memory when given (issue 22: the status must not depend on the store).
        self._latch_in_force = latch_in_force or store.get_latch
        self._audit_rows = audit_rows or (lambda limit: store.list_audit(limit=limit))
        self._drain = drain
        self._sides = SideEngines()
        self._side_canaries: Callable[[], dict[str, list[dict[str, Any]]]] = dict

    def attach_side_engines(
        self,
        sides: SideEngines,
        canaries: Callable[[], dict[str, list[dict[str, Any]]]] = dict,
    ) -> None:
        """The engines beside the primary one (``daemon.engine.fleet``): ``engines``' rest.

        ``canaries``: each side engine's canary entries by profile (``daemon.canaries.engines``).
        """
        self._sides = sides
        self._side_canaries = canaries

    def _side(self, engine: str | None) -> SideEngine | None:
        """The side engine ``engine`` names; None for the primary (no name, or its profile)."""
        if engine is None or (self._engine is not None and engine == self._engine.profile):
            return None
        if engine not in self._sides.names():
            known = [
                *([] if self._engine is None else [self._engine.profile]),
                *self._sides.names(),
            ]
            raise NotFound(
                f"no engine {engine!r} on this rig (engines: {', '.join(known) or 'none'})"
            )
        return self._sides.get(engine)

    @property
    def sim(self) -> SimulationControl | None:
        """Fault injection, only under ``--simulate``."""
        return self._sim

    # -- serving ----------------------------------------------------------------------
    def _require_engine(self) -> EngineControl:
        if self._engine is None:
            raise Conflict("no engine is configured on this rig", "no_engine")
        return self._engine

    def serving_document(self) -> dict[str, Any]:
        """The status's ``serving`` block (docs/reference.md "JSON documents")."""
        if self._engine is None:
            return {
                "state": "stopped",
                "pid": None,
                "restarts": 0,
                "since": None,
                "url": None,
                "profile": None,
            }
        return self._engine.status_document()

    def serving_state(self) -> str:
        """The engine's state word."""
        return str(self.serving_document()["state"])

    def serving_action(
        self, action: str, stop_foreign: bool = False, engine: str | None = None
    ) -> dict[str, Any]:
        """A person's stop (recovery's stop path), start or restart (its start path).

        ``stop_foreign`` (start only) first stops the foreign containers holding the port
        or the profile's cards, unless the start gate refuses the start anyway. ``engine``:
        a side engine's profile is moved by that engine's own controller.
        """
        if action not in ("start", "restart", "stop"):
            raise NotFound(f"unknown action {action!r}")
        side = self._side(engine)
        if side is not None:
            return self._move(action, stop_foreign, side.service, side.recovery)
        return self._move(action, stop_foreign, self._require_engine(), self._require_recovery())

    def _move(
        self,
        action: str,
        stop_foreign: bool,
        engine: EngineControl,
        recovery: StartStop,
    ) -> dict[str, Any]:
        if action == "stop":
            stop = recovery.request_stop(Trigger.STOP_REQUEST, "api")
            return {"action": "stop", "accepted": stop.stopped, "serving": engine.status_document()}
        wanted = stop_foreign and action == "start"
        stopped = engine.stop_foreign_before_start("api") if wanted else None
        answer = recovery.request_start(Trigger.START_REQUEST, "api", action == "restart")
        document = start_document(action, answer, engine.status_document())
        return document if stopped is None else {**document, "stopped_foreign": stopped}

    def serving_profiles(self) -> dict[str, Any]:
        """``GET /api/v1/serving/profiles``."""
        return self._require_engine().profiles_document()

    def serving_switch(self, profile: str, stop_foreign: bool = False) -> dict[str, Any]:
        """``POST /api/v1/serving/switch``: stop cleanly, switch, recovery's start path."""
        return self._require_engine().switch(profile, "api", stop_foreign=stop_foreign)

    def serving_logs(self, lines: int, engine: str | None = None) -> list[str]:
        """The engine log's last lines (``engine``: a side engine's, by its profile)."""
        side = self._side(engine)
        if side is not None:
            return side.service.logs(lines)
        return [] if self._engine is None else self._engine.logs(lines)

    def serving_follow(self, lines: int, engine: str | None = None) -> Iterator[str | None]:
        """``logs --follow``: the last ``lines`` lines, then new ones (``engine``: by profile)."""
        side = self._side(engine)
        if side is not None:
            return side.service.follow(lines)
        return self._require_engine().follow(lines)

    def serving_recipe(self) -> RecipeDocument:
        """``recipe show`` through the daemon."""
        return self._require_engine().recipe_document()

    def close_serving(self) -> None:
        """Detach from the engine (it keeps running; ``stop_on_exit`` stopped it before)."""
        if self._engine is not None:
            self._engine.close()

    # -- reads ------------------------------------------------------------------------
    def recovery_document(self) -> RecoveryDocument:
        """The status's ``recovery`` block, plus the last decisions and bring-up."""
        latch = self._latch_in_force()
        if latch is None:
            doc = RecoveryDocument(reboot_required=False, reason=None, since=None, advice=None)
        else:
            wrong_boot = None if self._recovery is None else self._recovery.wrong_boot()
            running = self.serving_state() in ENGINE_RUNNING_STATES
            doc = RecoveryDocument(
                reboot_required=True,
                reason=latch.reason,
                since=iso(latch.since),
                advice=latch.advice_text(running, wrong_boot),
                advice_kind=latch.advice,
                way_out=WAY_OUT[latch.advice],
            )
        if self._recovery is not None:
            bring_up = self._recovery.last_bring_up
            doc.dry_run = self._recovery.dry_run
            doc.power_cycle = self._recovery.power_cycle_available()
            doc.decisions = self.last_decisions()
            doc.bring_up = None if bring_up is None else BringUpDocument.model_validate(bring_up)
            doc.evidence = None if self._evidence is None else self._evidence()
            refused = self._recovery.last_refused_start
            if refused is not None:
                doc.last_refused_start = RefusedStartDocument(
                    ts=iso(refused.at),
                    trigger=str(refused.trigger),
                    actor=refused.actor,
                    reasons=[
                        RefusalDocument.model_validate(refusal_document(reason))
                        for reason in refused.reasons
                    ],
                )
        return doc

    def _require_recovery(self) -> RecoveryControl:
        if self._recovery is None:
            raise Unavailable("recovery is not running in this daemon", "no_recovery")
        return self._recovery

    def last_decisions(self) -> list[RecoveryDecisionDocument]:
        """The newest recovery decisions and actions from the audit trail."""
        rows = [r for r in self._audit_rows(100) if r.action in RECOVERY_ACTIONS]
        return [
            RecoveryDecisionDocument(
                ts=iso(row.ts),
                actor=row.actor,
                action=row.action,
                reason=row.reason,
                outcome=row.outcome,
                dry_run=row.dry_run,
            )
            for row in rows[:LAST_DECISIONS]
        ]

    def recovery_reboot(
        self, confirm: bool, cold: bool = False, force: bool = False
    ) -> dict[str, Any]:
        """``POST /api/v1/recovery/reboot``."""
        return self._require_recovery().reboot(confirm, actor="api", cold=cold, force=force)

    def recovery_clear(self, reason: str) -> dict[str, Any]:
        """``POST /api/v1/recovery/clear``."""
        return self._require_recovery().clear(reason, actor="api")

    def status_document(self) -> StatusDocument:
        """The whole status document (``fleetctl status --json``), typed."""
        sides = self._sides.status_documents()  # read once: the engines list and in_profile
        document = self._status_document(sides)
        # The primary engine (the same block as ``serving``), then each side engine.
        side_canaries = self._side_canaries() if sides else {}
        document.engines = [
            EngineDocument.model_validate(
                {**document.serving.model_dump(exclude_unset=True), "canaries": document.canaries}
            ),
            *(
                EngineDocument.model_validate(
                    {**side, "canaries": side_canaries.get(str(side.get("profile")))}
                )
                for side in sides
            ),
        ]
        if self._drain is not None:
            document.drain = DrainDocument.model_validate(self._drain())
        return document

    def _status_document(self, sides: list[dict[str, Any]]) -> StatusDocument:
        serving = self.serving_document()
        engine_cards = None
        if sides:  # in_profile: a card any engine runs on
            engine_cards = sorted(
                {*(serving.get("cards") or ()), *(c for s in sides for c in s.get("cards") or ())}
            )
        return status_document(
            self._monitor.view(),
            rig=self._rig,
            serving=serving,
            recovery=self.recovery_document(),
            canaries=(
                [not_run_entry(name, "no engine is configured") for name in CANARY_NAMES]
                if self.canaries is None
                else self.canaries.status_entries()
            ),
            log_signatures=(
                None if self.canaries is None else self.canaries.log_signature_entries()
            ),
            simulated=self._sim is not None,
            kernel_records_lost=self._follower.lost_records,
            started_at=iso(self._started_at),
            gpu_pids=sorted(self.own_gpu_pids()),
            engine_cards=engine_cards,
            host=None if self._host_watch is None else self._host_watch.status(),
        )

    def own_gpu_pids(self) -> set[int]:
        """Processes whose ``/dev/nvidia*`` handles are the rig's own: fleetd, the engine trees.

        Every engine's: a side engine's workers hold the cards too, and read as foreign
        they would fail ``foreign_gpu_processes`` and gate the other's start.
        """
        engine_pids = self._engine.engine_pids() if self._engine is not None else set()
        for side in self._sides:
            engine_pids |= side.service.engine_pids()
        return {os.getpid(), *engine_pids}

    def list_events(self, query: EventQuery) -> list[EventDocument]:
        """Events newest first in their documented shape (plus ``pci_bus_id`` and the ack)."""
        kind = query.kind
        if kind is not None and kind not in set(EventKind):
            raise InvalidInput(f"unknown event kind {kind!r}: one of {', '.join(EventKind)}")
        if query.before_id is not None and self._store.get_event(query.before_id) is None:
            raise NotFound(f"before_id {query.before_id}: no such event")
        rows = self._store.list_events(
            since=_utc(query.since),
            until=_utc(query.until),
            kind=kind,
            limit=query.limit,
            card=query.card,
            acked=query.acked,
            before_id=query.before_id,
            min_severity=None if query.min_severity is None else Severity(query.min_severity),
        )
        return [
            EventDocument(
                id=row.id,
                ts=iso(row.ts),
                kind=row.kind,
                card=row.card,
                xid=row.xid,
                severity=row.severity,
                message=row.message,
                pci_bus_id=row.pci_bus_id,
                acked=row.acked,
                acked_at=iso(row.acked_at),
                acked_by=row.acked_by,
                **kernel_time_of(row),
            )
            for row in rows
        ]

    def apply_caps(self) -> dict[str, Any]:
        """Re-apply the configured power cap to every card that is off it, now."""
        try:
            snapshot = self._gpu.snapshot()
        except BackendError as exc:
            raise Unavailable(f"cannot read the cards: {exc}", "backend") from None
        results = self._caps.apply(snapshot, actor="api")
        return {"target_w": self._caps.target_w, "cards": [r.as_dict() for r in results]}

    def ack_event(self, event_id: int, by: str) -> dict[str, Any]:
        """Acknowledge one event."""
        if not self._store.ack_event(event_id, by):
            raise NotFound(f"no event {event_id}")
        return {"id": event_id, "acked": True}

    def history(self, span: str) -> dict[str, Any]:
        """The dashboard's charts of the cards in the latest poll over ``span``."""
        latest = self._monitor.view().latest
        cards = [] if latest is None else [(card.index, card.uuid) for card in latest.cards]
        return self.history_cache.document(cards, span)
