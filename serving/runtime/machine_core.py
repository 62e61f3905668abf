"""The serving state machine's state, its published status and the events it announces.

``MachineCore`` holds what one engine's supervision knows (state, reason, handle, launch
record, backoff deadline, stop plan, the running restart total, what it awaits) and the
collaborators that keep the rest (health watch, start gate, the reports' listener). Its subclasses say what happens: ``RunEnding`` how a run
ends, ``ServingMachine`` the commands and starts. All of it runs on the loop thread;
only ``status`` is read from other threads, under a lock.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from pathlib import Path

import httpx

from hwcheck.model import Severity
from hwcheck.threads import CrashReport
from serving.recipe.spec import LaunchSpec
from serving.runtime.classify import CrashClass
from serving.runtime.commands import Request
from serving.runtime.health_watch import HealthWatch
from serving.runtime.launchers import EngineHandle, Launcher
from serving.runtime.logcapture import LogCapture
from serving.runtime.preflight import Preflight, StartGate
from serving.runtime.reports import EngineReports
from serving.runtime.states import (
    Drift,
    LaunchRecord,
    Refusal,
    ServingChange,
    ServingEvent,
    ServingState,
    ServingStatus,
)
from serving.runtime.stopping import StopPlan
from serving.runtime.supervisor_state import SavedHold, SavedState, SupervisorStateFile
from serving.settings import ServingSettings, SupervisorTuning

# The kernel log's OOM-killer record naming one of the engine's pids (None: none). The
# daemon answers it from the host's kernel-log sources (``hwcheck.kernellog.oom``); serving
# never reads the host.
OomRecordLookup = Callable[[Collection[int]], str | None]
# The engine's processes are noted at most this often while it runs (a scan of /proc):
# the OOM killer names a worker or a wrapper's child, gone by the time the engine ends.
FAMILY_EVERY_S = 5.0
FAMILY_MAX_PIDS = 256
LOG = logging.getLogger("serving.runtime.supervisor")

EventSink = Callable[[ServingEvent], None]


class Awaiting(enum.Enum):
    """What the machine reported and waits an answer for (a command it then obeys)."""

    EXIT = "exit"  # a run ended on its own: restart_after, hold or stay_stopped
    BACKOFF_DUE = "backoff_due"  # the backoff is over: a start of kind restart, or stay_stopped


def utcnow() -> datetime:
    """Wall-clock time for records and events (intervals use the monotonic clock)."""
    return datetime.now(UTC)


class MachineCore:
    """State, status and events of one engine's supervision."""

    def __init__(
        self,
        spec_factory: Callable[[], LaunchSpec],
        launcher: Launcher,
        state_dir: Path,
        capture: LogCapture,
        client: httpx.Client,
        *,
        serving: ServingSettings,
        tuning: SupervisorTuning,
        preflight: Preflight,
        on_event: EventSink,
        reports: EngineReports,
        enqueue: Callable[[Request], None],
        closed: threading.Event,
        clock: Callable[[], float] = time.monotonic,
        on_crash: CrashReport | None = None,
        oom_record: OomRecordLookup | None = None,
    ) -> None:
        self._spec_factory = spec_factory
        # Asked when the engine ends by SIGKILL: the OOM killer's record for its pid tells
        # oom_killed from killed (None: no kernel log to ask).
        self._oom_record = oom_record
        self._launcher = launcher
        self._capture = capture
        self._serving = serving
        self._tuning = tuning
        self._on_event = on_event
        self._reports = reports
        self._enqueue = enqueue
        self._closed = closed
        self._clock = clock
        self._on_crash = on_crash  # told if an engine watcher thread dies
        self._gate = StartGate(preflight)
        self._health = HealthWatch(client, serving, tuning, clock)
        self.restarts = 0  # automatic restarts, a running total (never reset)
        self._awaiting: Awaiting | None = None
        self._ready_for_s: float | None = None  # how long the run that just ended was ready
        self._state_file = SupervisorStateFile(state_dir)
        self._status_lock = threading.Lock()
        self._state = ServingState.STOPPED
        self._reason: str | None = None
        self._since = utcnow()
        self._handle: EngineHandle | None = None
        self._family: set[int] = set()  # every pid the running engine had (OOM lookup)
        self._family_due_s = 0.0
        self._url: str | None = None
        self._launch_record: LaunchRecord | None = None
        self._backoff_until: float | None = None
        self._stop_plan: StopPlan | None = None
        self._crash_class: CrashClass | None = None
        self._last_refusal: tuple[Refusal, ...] = ()
        self._drift: Drift | None = None
        self._status = self._build_status()

    def restore(self) -> None:
        """Pick up the restart count and a breaker hold a previous fleetd saved."""
        saved = self._state_file.load()
        self.restarts = saved.restarts
        if saved.hold is not None:
            self._state = ServingState.HELD
            self._reason = saved.hold.reason
            self._since = saved.hold.since or self._since
            self.publish()

    def _save_state(self) -> None:
        """Save the restart count and, while held, the hold (reason and since)."""
        held = self._state is ServingState.HELD and self._reason is not None
        hold = SavedHold(self._reason or "", self._since) if held else None
        self._state_file.save(SavedState(self.restarts, hold))

    @property
    def status(self) -> ServingStatus:
        """The last published status (any thread)."""
        with self._status_lock:
            return self._status

    def publish(self) -> None:
        """Make the current state what ``status`` returns."""
        status = self._build_status()
        with self._status_lock:
            self._status = status

    def _set_state(
        self, state: ServingState, reason: str | None, severity: Severity = Severity.OK
    ) -> None:
        changed = state is not self._state or reason != self._reason
        hold_changed = (state is ServingState.HELD) != (self._state is ServingState.HELD)
        self._state = state
        self._reason = reason
        if not changed:
            return
        self._since = utcnow()
        if hold_changed or state is ServingState.HELD:
            self._save_state()  # a hold must survive a fleetd restart, with its reason
        self.publish()
        self._emit(ServingChange.STATE, severity, f"serving {state}: {reason or ''}".rstrip(": "))

    def _warn(self, message: str) -> None:
        self._emit(ServingChange.WARNING, Severity.WARNING, message)

    def _warn_at(self, severity: Severity, message: str) -> None:
        self._emit(ServingChange.WARNING, severity, message)

    def _emit(
        self,
        kind: ServingChange,
        severity: Severity,
        message: str,
        *,
        crash_class: CrashClass | None = None,
        evidence: str | None = None,
        advice: str | None = None,
        launch: LaunchRecord | None = None,
        refusals: tuple[Refusal, ...] = (),
        drift: Drift | None = None,
    ) -> None:
        event = ServingEvent(
            kind=kind,
            ts=utcnow(),
            state=self._state,
            severity=severity,
            message=message,
            crash_class=crash_class,
            evidence=evidence,
            advice=advice,
            launch=launch,
            refusals=refusals,
            drift=drift,
        )
        try:
            self._on_event(event)
        except Exception:
            LOG.exception("the serving event handler failed for %s", kind)

    def _build_status(self) -> ServingStatus:
        deadline = None
        if self._state is ServingState.BACKOFF and self._backoff_until is not None:
            deadline = self._backoff_until
        return ServingStatus(
            state=self._state,
            pid=None if self._handle is None else self._handle.pid,
            restarts=self.restarts,
            since=self._since,
            url=self._url,
            reason=self._reason,
            crash_class=self._crash_class,
            metrics=self._health.metrics,
            adopted=self._handle is not None and self._handle.adopted,
            backoff_until_s=deadline,
            last_refusal=self._last_refusal,
            drift=self._drift,
        )
