"""What the API and fleetctl can ask of a running fleetd (the ``WebServices`` protocol).

Reads come from the monitor's in-memory view and the store; nothing here calls NVML.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from hwcheck.backend import BackendError
from hwcheck.model import Severity, worst_severity
from hwcheck.report import rig_document
from web.services import ServiceError, SimulationControl

if TYPE_CHECKING:
    from daemon.runtime import Daemon


class EngineControl(Protocol):
    """The engine service (``daemon.engine_service``) as the daemon's services see it."""

    def status_document(self) -> dict[str, Any]:
        """CONTRACT's ``serving`` block."""
        ...

    def action(self, action: str) -> dict[str, Any]:
        """``start|stop|restart``; raises ``ServiceError`` when refused."""
        ...

    def logs(self, lines: int) -> list[str]:
        """The last lines of the engine log."""
        ...

    def follow(self, backlog: int) -> Iterator[str | None]:
        """Backlog then new log lines, until the reader goes away."""
        ...

    def recipe_document(self) -> dict[str, Any]:
        """The spec the daemon would launch and its diff to the last ready launch."""
        ...

    def close(self, stop_engine: bool) -> None:
        """Stop supervising; stop the engine only when asked."""
        ...


# An engine in these states serves nothing: the rig is not OK even if every card is.
ENGINE_DOWN_STATES = frozenset({"failed", "held", "backoff", "unhealthy"})
EVENT_KINDS = ("xid", "check", "serving", "recovery", "daemon", "reboot", "operator", "launch")
ADVICE_REBOOT = (
    "stop the engine cleanly (fleetctl stop), then reboot the host (sudo systemctl reboot). "
    "Never reload nvidia_uvm or kill -9 GPU workers."
)


def iso(ts: datetime | None) -> str | None:
    """ISO 8601 with a UTC offset (CONTRACT's time format)."""
    if ts is None:
        return None
    return (ts if ts.tzinfo else ts.replace(tzinfo=UTC)).isoformat()


class DaemonServices:
    """The daemon's answers to API requests."""

    def __init__(
        self,
        daemon: Daemon,
        *,
        token: str,
        loopback_only: bool,
        sim: SimulationControl | None,
    ) -> None:
        self._daemon = daemon
        self.token = token
        self.loopback_only = loopback_only
        self._sim = sim
        self._started_at = datetime.now(UTC)

    @property
    def sim(self) -> SimulationControl | None:
        """Fault injection, only under ``--simulate``."""
        return self._sim

    # -- serving (the engine service, when a recipe is configured) -------------------
    def serving_document(self) -> dict[str, Any]:
        """CONTRACT's ``serving`` block."""
        engine = self._daemon.engine
        if engine is None:
            return {"state": "stopped", "pid": None, "restarts": 0, "since": None, "url": None}
        return engine.status_document()

    def serving_state(self) -> str:
        """The engine's state word."""
        return str(self.serving_document()["state"])

    def serving_action(self, action: str) -> dict[str, Any]:
        """Start, stop or restart the engine through the supervisor."""
        engine = self._daemon.engine
        if engine is None:
            raise ServiceError(409, "no engine is configured on this rig", "no_engine")
        return engine.action(action)

    def serving_logs(self, lines: int) -> list[str]:
        """The engine log's last lines."""
        engine = self._daemon.engine
        return [] if engine is None else engine.logs(lines)

    def serving_follow(self, lines: int) -> Iterator[str | None]:
        """``logs --follow``: the last ``lines`` lines, then new ones."""
        engine = self._daemon.engine
        if engine is None:
            raise ServiceError(409, "no engine is configured on this rig", "no_engine")
        return engine.follow(lines)

    def serving_recipe(self) -> dict[str, Any]:
        """``recipe show`` through the daemon."""
        engine = self._daemon.engine
        if engine is None:
            raise ServiceError(409, "no engine is configured on this rig", "no_engine")
        return engine.recipe_document()

    def close_serving(self, stop_engine: bool) -> None:
        """Detach from the engine (stopping it only with ``stop_on_exit``)."""
        engine = self._daemon.engine
        if engine is not None:
            engine.close(stop_engine=stop_engine)

    # -- reads ------------------------------------------------------------------------
    def recovery_document(self) -> dict[str, Any]:
        """CONTRACT's ``recovery`` block."""
        latch = self._daemon.store.get_latch()
        if latch is None:
            return {"reboot_required": False, "reason": None, "since": None, "advice": None}
        return {
            "reboot_required": True,
            "reason": latch.reason,
            "since": iso(latch.since),
            "advice": latch.advice or ADVICE_REBOOT,
        }

    def status_document(self) -> dict[str, Any]:
        """The whole status document (CONTRACT: ``fleetctl status --json``)."""
        daemon = self._daemon
        view = daemon.monitor.view()
        latest = view.latest
        serving = self.serving_document()
        recovery = self.recovery_document()
        if latest is None:
            doc: dict[str, Any] = {"overall": "unknown", "cards": [], "checks": []}
        else:
            doc = rig_document(latest, view.results, view.xids)
            worst = worst_severity(list(view.results))
            if recovery["reboot_required"]:
                worst = Severity.CRITICAL
            elif serving["state"] in ENGINE_DOWN_STATES and worst is Severity.OK:
                worst = Severity.WARNING
            doc["overall"] = worst.value
        doc["serving"] = serving
        doc["recovery"] = recovery
        doc["rig"] = {
            "simulated": daemon.sim is not None,
            "boot_id": view.boot_id,
            "polls": view.polls,
            "last_poll": iso(latest.taken_at) if latest else None,
            "last_poll_error": view.last_poll_error,
            "xid_since_boot": len(view.xids),
            "kernel_records_lost": daemon.follower.lost_records,
        }
        doc["daemon"] = {"pid": os.getpid(), "started_at": iso(self._started_at)}
        return doc

    def list_events(
        self, since: datetime | None, kind: str | None, limit: int, card: int | None
    ) -> list[dict[str, Any]]:
        """Events newest first in CONTRACT's shape (plus ``acked``/``details``)."""
        if kind is not None and kind not in EVENT_KINDS:
            raise ServiceError(400, f"unknown event kind {kind!r}: one of {', '.join(EVENT_KINDS)}")
        if since is not None and since.tzinfo is None:
            since = since.replace(tzinfo=UTC)  # a time without an offset is read as UTC
        rows = self._daemon.store.list_events(since=since, kind=kind, limit=limit, card=card)
        return [
            {
                "id": row.id,
                "ts": iso(row.ts),
                "kind": row.kind,
                "card": row.card,
                "xid": row.xid,
                "severity": row.severity,
                "message": row.message,
                "pci_bus_id": row.pci_bus_id,
                "acked": row.acked_at is not None,
            }
            for row in rows
        ]

    def apply_caps(self) -> dict[str, Any]:
        """Re-apply the configured power cap to every card that is off it, now."""
        caps = self._daemon.caps
        try:
            snapshot = self._daemon.host.gpu.snapshot()
        except BackendError as exc:
            raise ServiceError(503, f"cannot read the cards: {exc}", "backend") from None
        results = caps.apply(snapshot, actor="api")
        return {"target_w": caps.target_w, "cards": [r.as_dict() for r in results]}

    def ack_event(self, event_id: int, by: str) -> dict[str, Any]:
        """Acknowledge one event."""
        if not self._daemon.store.ack_event(event_id, by):
            raise ServiceError(404, f"no event {event_id}", "not_found")
        return {"id": event_id, "acked": True}
