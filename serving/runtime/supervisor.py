"""The engine's supervisor: one state machine, one loop thread, commands through a queue.

Callers (API handlers, signal handlers, the recovery policy) never touch the state: they
enqueue a command and, if they want, wait for its result. The loop thread waits on the
queue with a timeout set to the next thing due (a probe, the end of a backoff, a stop
deadline), dispatches commands, then does what is due. A watcher thread per engine blocks
on the launcher's ``wait`` and enqueues "exited" the moment the engine ends, so a crash is
seen at once rather than at the next probe.

States are CONTRACT's: ``stopped starting ready unhealthy stopping backoff held failed``.
``held`` is only the crash breaker's; ``failed`` is a stop that did not take (the engine
ignored SIGINT and SIGTERM): it says "reboot recommended" and kills nothing unless
``allow_kill`` is set. Stopping fleetd leaves the engine running; the next supervisor on
the same state dir adopts it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import shlex
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from hwcheck.model import Severity
from serving.recipe.masking import mask_argv
from serving.recipe.spec import LaunchSpec
from serving.runtime.classify import CrashClass, explain_exit, split_returncode
from serving.runtime.engine_record import EngineRecord, RecordError, spec_hash
from serving.runtime.launchers import EngineHandle, Launcher, LauncherError, LaunchError
from serving.runtime.logcapture import LogCapture
from serving.runtime.metrics import EngineMetrics, MetricsError, MetricsScraper
from serving.runtime.probes import EngineProber, ProbeTarget, new_probe_client
from serving.runtime.states import (
    LaunchRecord,
    Refusal,
    ServingChange,
    ServingEvent,
    ServingState,
    ServingStatus,
    StartRefused,
    StartResult,
    SupervisorClosed,
    SupervisorSettings,
)

_LOG = logging.getLogger(__name__)

SUPERVISOR_STATE_NAME = "supervisor.json"
_WATCH_SLICE_S = 1.0

Preflight = Callable[[], list[Refusal]]
EventSink = Callable[[ServingEvent], None]


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Command:
    """One request to the loop; ``result`` is set when it is done."""

    kind: str
    args: dict[str, Any] = field(default_factory=dict)
    result: Future[Any] = field(default_factory=Future)


@dataclass
class _StopPlan:
    """A stop in progress: which signal was sent, until when to wait, what comes after."""

    reason: str
    final_reason: str
    then: str  # "stopped" | "backoff" | "start"
    phase: str = "graceful"
    deadline: float = 0.0
    waiters: list[Future[Any]] = field(default_factory=list)


class Supervisor:
    """Starts, watches, restarts and stops one engine.

    ``spec_factory`` builds the launch spec at each start (so a changed recipe applies at
    the next start); ``preflight`` returns reasons that block a start and warnings;
    ``on_event`` receives every :class:`ServingEvent` on the loop thread (keep it quick; a
    callback may enqueue commands, which then do not wait for their result).
    """

    def __init__(
        self,
        spec_factory: Callable[[], LaunchSpec],
        launcher: Launcher,
        state_dir: Path,
        *,
        settings: SupervisorSettings,
        preflight: Preflight,
        on_event: EventSink,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._spec_factory = spec_factory
        self._launcher = launcher
        self._state_dir = state_dir
        self._settings = settings
        self._preflight = preflight
        self._on_event = on_event
        self._clock = clock
        self._capture = LogCapture(
            launcher.log_path,
            max_bytes=settings.log_max_bytes,
            backups=settings.log_backups,
            tail_lines=settings.log_tail_lines,
            poll_interval_s=settings.log_poll_interval_s,
        )
        self._client = new_probe_client()
        self._prober = EngineProber(self._client, settings.probe_timeout_s)
        self._scraper = MetricsScraper(
            self._client, clock=clock, timeout_s=settings.probe_timeout_s
        )
        self._commands: queue.Queue[_Command] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._submit_lock = threading.Lock()
        self._status_lock = threading.Lock()
        # Everything below is touched by the loop thread only.
        self._state = ServingState.STOPPED
        self._reason: str | None = None
        self._since = _utcnow()
        self._handle: EngineHandle | None = None
        self._target: ProbeTarget | None = None
        self._url: str | None = None
        self._launch_record: LaunchRecord | None = None
        self._starting_since = 0.0
        self._ready_since: float | None = None
        self._next_probe = 0.0
        self._next_metrics = 0.0
        self._health_failures = 0
        self._failures_in_a_row = 0
        self._restart_times: deque[float] = deque()
        self._restarts = 0
        self._backoff_until: float | None = None
        self._stop_plan: _StopPlan | None = None
        self._crash_class: CrashClass | None = None
        self._metrics: EngineMetrics | None = None
        self._last_refusal: tuple[Refusal, ...] = ()
        self._survivors: tuple[int, ...] = ()
        self._status = self._build_status()

    # ==================================================================================
    # Public API (any thread)
    # ==================================================================================

    def open(self, adopt: bool = True, timeout_s: float | None = 30.0) -> bool:
        """Start the loop and adopt a running engine if one is recorded; True if adopted."""
        if self._thread is not None:
            raise RuntimeError("supervisor is already open")
        self._restarts = self._load_restarts()
        self._capture.open()
        self._thread = threading.Thread(target=self._run, name="serving-supervisor", daemon=True)
        self._thread.start()
        if not adopt:
            self._publish()
            return False
        return bool(self._submit("adopt", {}, wait=True, timeout_s=timeout_s))

    def start(self, timeout_s: float | None = 60.0) -> StartResult:
        """Start the engine by a person's request; raises :class:`StartRefused`.

        Clears a breaker hold and the backoff streak; a no-op when already running.
        """
        result = self._submit("start", {}, wait=True, timeout_s=timeout_s)
        return result if isinstance(result, StartResult) else StartResult(None, False)

    def stop(
        self,
        reason: str = "stopped by request",
        hold_reason: str | None = None,
        wait: bool = True,
        timeout_s: float | None = None,
    ) -> ServingStatus:
        """Stop the engine (SIGINT, then SIGTERM; never SIGKILL unless allow_kill).

        Leaves the state ``stopped`` (or ``failed`` if the engine will not stop) with no
        automatic restart. ``hold_reason`` is what the status shows afterwards: the
        recovery policy passes its latch reason. With ``wait`` it returns once the stop
        has finished (bounded by the stop timeouts, or ``timeout_s``).
        """
        args = {"reason": reason, "hold_reason": hold_reason}
        self._submit("stop", args, wait=wait, timeout_s=timeout_s)
        return self.status()

    def restart(self, timeout_s: float | None = None) -> StartResult:
        """Stop then start; preflight is checked first, so a refusal leaves it running."""
        result = self._submit("restart", {}, wait=True, timeout_s=timeout_s)
        return result if isinstance(result, StartResult) else StartResult(None, False)

    def adopt(self, timeout_s: float | None = 30.0) -> bool:
        """Adopt the engine named in ``engine.pid`` if it still runs; True if adopted."""
        return bool(self._submit("adopt", {}, wait=True, timeout_s=timeout_s))

    def clear_hold(self, timeout_s: float | None = 10.0) -> ServingStatus:
        """A person acknowledges the breaker: ``held`` becomes ``stopped`` (no start)."""
        self._submit("clear_hold", {}, wait=True, timeout_s=timeout_s)
        return self.status()

    def status(self) -> ServingStatus:
        """The current status (with the live last log line)."""
        with self._status_lock:
            status = self._status
        return replace(status, last_log_line=self._capture.last_line)

    def logs(self, n: int = 100) -> list[str]:
        """The engine's last ``n`` log lines."""
        return self._capture.tail(n)

    @property
    def log_capture(self) -> LogCapture:
        """The log capture, for ``fleetctl logs --follow`` (``subscribe``/``follow``)."""
        return self._capture

    def close(self, stop_engine: bool = False, timeout_s: float | None = None) -> None:
        """Stop supervising. The engine keeps running unless ``stop_engine`` (stop_on_exit)."""
        if self._thread is None:
            self._capture.close()
            self._client.close()
            return
        if stop_engine and not self._closed.is_set():
            self.stop("fleetd is shutting down (stop_on_exit)", wait=True, timeout_s=timeout_s)
        if not self._closed.is_set():
            with contextlib.suppress(SupervisorClosed):
                self._submit("close", {}, wait=True, timeout_s=timeout_s)
        self._thread.join(timeout=timeout_s)
        self._capture.close()
        self._client.close()

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _submit(
        self, kind: str, args: dict[str, Any], *, wait: bool, timeout_s: float | None
    ) -> Any:
        command = _Command(kind, args)
        # Checked and enqueued under the lock that close takes, so no command slips in
        # after the loop drained the queue (it would wait forever).
        with self._submit_lock:
            if self._closed.is_set() or self._thread is None:
                raise SupervisorClosed(f"the supervisor is closed; cannot {kind}")
            self._commands.put(command)
        if not wait or threading.current_thread() is self._thread:
            return None
        return command.result.result(timeout=timeout_s)

    # ==================================================================================
    # The loop
    # ==================================================================================

    def _run(self) -> None:
        while True:
            try:
                command: _Command | None = self._commands.get(timeout=self._wait_s())
            except queue.Empty:
                command = None
            if command is not None and command.kind == "close":
                self._close_from_loop(command)
                return
            if command is not None:
                self._dispatch(command)
            try:
                self._tick()
            except Exception:
                _LOG.exception("the serving supervisor's tick failed; carrying on")
            self._publish()

    def _wait_s(self) -> float | None:
        now = self._clock()
        due: list[float] = []
        if self._state in (ServingState.STARTING, ServingState.READY):
            due.append(self._next_probe)
        if self._state is ServingState.BACKOFF and self._backoff_until is not None:
            due.append(self._backoff_until)
        if self._state is ServingState.STOPPING and self._stop_plan is not None:
            due.append(self._stop_plan.deadline)
        if not due:
            return None
        return max(min(due) - now, 0.0)

    def _dispatch(self, command: _Command) -> None:
        handlers: dict[str, Callable[[_Command], Any]] = {
            "start": self._cmd_start,
            "stop": self._cmd_stop,
            "restart": self._cmd_restart,
            "adopt": self._cmd_adopt,
            "clear_hold": self._cmd_clear_hold,
            "exited": self._cmd_exited,
        }
        try:
            outcome = handlers[command.kind](command)
        except Exception as exc:
            if not isinstance(exc, StartRefused):
                _LOG.exception("serving command %s failed", command.kind)
            if not command.result.done():
                command.result.set_exception(exc)
            return
        if outcome is not _PENDING and not command.result.done():
            command.result.set_result(outcome)

    def _tick(self) -> None:
        now = self._clock()
        if self._state in (ServingState.STARTING, ServingState.READY) and now >= self._next_probe:
            self._probe(now)
        elif self._state is ServingState.BACKOFF and self._backoff_until is not None:
            if now >= self._backoff_until:
                self._auto_start()
        elif (
            self._state is ServingState.STOPPING
            and self._stop_plan is not None
            and now >= self._stop_plan.deadline
        ):
            self._escalate_stop()

    def _close_from_loop(self, command: _Command) -> None:
        with self._submit_lock:
            self._closed.set()
        if self._handle is not None:
            try:
                self._launcher.detach(self._handle)
            except (LauncherError, OSError):
                _LOG.exception("detaching from the engine failed")
        plan = self._stop_plan
        if plan is not None:
            for waiter in plan.waiters:
                if not waiter.done():
                    waiter.set_result(None)
        # Commands that arrived after close get a clear error rather than a hang.
        while True:
            try:
                pending = self._commands.get_nowait()
            except queue.Empty:
                break
            if not pending.result.done():
                pending.result.set_exception(SupervisorClosed("the supervisor closed"))
        command.result.set_result(None)

    # ==================================================================================
    # Commands
    # ==================================================================================

    def _cmd_start(self, command: _Command) -> Any:
        return self._manual_start()

    def _manual_start(self) -> StartResult:
        if self._handle is not None and self._state in (
            ServingState.STARTING,
            ServingState.READY,
            ServingState.UNHEALTHY,
        ):
            return StartResult(pid=self._handle.pid, already_running=True)
        if self._state is ServingState.STOPPING:
            raise self._refuse(
                (Refusal("stopping", "the engine is stopping; start it once it has stopped"),),
                keep_state=True,
            )
        if (
            self._state is ServingState.FAILED
            and self._handle is not None
            and self._launcher.is_alive(self._handle)
        ):
            raise self._stuck_refusal(self._handle)
        warnings = self._run_preflight(keep_state=self._state is not ServingState.HELD)
        self._failures_in_a_row = 0
        self._restart_times.clear()
        spec = self._build_spec()
        try:
            handle = self._launch(spec, reason="started by request")
        except LaunchError as exc:
            self._set_state(ServingState.STOPPED, f"launch failed: {exc}")
            raise self._refuse((Refusal("launch_failed", str(exc)),), keep_state=True) from exc
        return StartResult(pid=handle.pid, already_running=False, warnings=warnings)

    def _cmd_stop(self, command: _Command) -> Any:
        reason = str(command.args["reason"])
        hold_reason = command.args.get("hold_reason")
        final_reason = str(hold_reason) if hold_reason else reason
        plan = self._stop_plan
        if plan is not None:
            # Already stopping: a person's stop now wins over a restart plan.
            plan.then = "stopped"
            plan.final_reason = final_reason
            plan.waiters.append(command.result)
            return _PENDING
        if self._handle is None:
            self._backoff_until = None
            self._set_state(ServingState.STOPPED, final_reason)
            return None
        self._begin_stop(reason, final_reason, then="stopped", waiter=command.result)
        return _PENDING

    def _cmd_restart(self, command: _Command) -> Any:
        # Refuse before stopping: a restart that cannot start must not stop the engine.
        self._run_preflight(keep_state=True, announce=False)
        if self._handle is None or not self._launcher.is_alive(self._handle):
            if self._handle is not None:
                self._engine_ended()
            self._set_state(ServingState.STOPPED, "restart requested")
            return self._manual_start()
        if self._state is ServingState.FAILED:
            raise self._stuck_refusal(self._handle)
        plan = self._stop_plan
        if plan is not None:
            plan.then = "start"
            plan.waiters.append(command.result)
            return _PENDING
        self._begin_stop(
            "restart requested", "restart requested", then="start", waiter=command.result
        )
        return _PENDING

    def _cmd_clear_hold(self, command: _Command) -> Any:
        if self._state is ServingState.HELD:
            self._failures_in_a_row = 0
            self._restart_times.clear()
            self._set_state(ServingState.STOPPED, "breaker hold cleared by a person")
        return None

    def _cmd_adopt(self, command: _Command) -> Any:
        if self._handle is not None:
            return False
        handle = self._find_engine()
        if handle is None:
            return False
        self._capture.begin_session_at_last_launch()
        record = handle.record
        started_at = _parse_time(record.launched_at) or _utcnow()
        self._launch_record = LaunchRecord(
            launch_id=uuid.uuid4().hex,
            argv=record.argv,
            env={},
            recipe_hash=record.recipe_hash,
            spec_hash=record.spec_hash,
            pid=record.pid,
            adopted=True,
            started_at=started_at,
        )
        self._attach(handle)
        self._set_state(ServingState.STARTING, f"adopted the running engine (pid {handle.pid})")
        self._next_probe = self._clock()
        self._emit(
            ServingChange.ADOPTED,
            Severity.OK,
            f"adopted the engine fleetd launched earlier (pid {handle.pid}, {record.base_url})",
            launch=self._launch_record,
        )
        self._warn_if_outdated(record)
        return True

    def _cmd_exited(self, command: _Command) -> Any:
        if command.args.get("handle") is self._handle and self._handle is not None:
            self._engine_ended()
        return None

    # ==================================================================================
    # Starting
    # ==================================================================================

    def _refuse(self, refusals: tuple[Refusal, ...], keep_state: bool) -> StartRefused:
        blocking = tuple(r for r in refusals if r.blocking)
        self._last_refusal = blocking
        if not keep_state and self._state is not ServingState.STOPPED:
            self._set_state(ServingState.STOPPED, blocking[0].message if blocking else None)
        self._emit(
            ServingChange.REFUSED,
            Severity.WARNING,
            "engine start refused: " + "; ".join(r.message for r in blocking),
            refusals=blocking,
        )
        return StartRefused(blocking)

    def _stuck_refusal(self, handle: EngineHandle) -> StartRefused:
        message = (
            f"the engine that would not stop still runs (pid {handle.pid}): reboot recommended"
        )
        return self._refuse((Refusal("stop_stuck", message),), keep_state=True)

    def _run_preflight(self, keep_state: bool, announce: bool = True) -> tuple[Refusal, ...]:
        """Blocking reasons raise :class:`StartRefused`; warnings are returned."""
        try:
            found = tuple(self._preflight())
        except Exception as exc:
            _LOG.exception("the serving preflight failed")
            found = (Refusal("preflight_error", f"preflight check failed: {exc}"),)
        leftovers = self._live_survivors()
        if leftovers:
            found += (
                Refusal(
                    "engine_survivors",
                    f"processes of the previous engine still run (pids "
                    f"{', '.join(map(str, leftovers))}) and may hold GPU memory: a new engine "
                    "would start on top of them; reboot (they are never killed for you)",
                ),
            )
        blocking = tuple(r for r in found if r.blocking)
        if blocking:
            raise self._refuse(blocking, keep_state=keep_state)
        self._last_refusal = ()
        warnings = tuple(r for r in found if not r.blocking)
        if warnings and announce:
            self._emit(
                ServingChange.WARNING,
                Severity.WARNING,
                "engine starts with warnings: " + "; ".join(w.message for w in warnings),
                refusals=warnings,
            )
        return warnings

    def _live_survivors(self) -> tuple[int, ...]:
        """Processes left behind by the last engine that still run (not zombies)."""
        alive = []
        for pid in self._survivors:
            with contextlib.suppress(psutil.Error):
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
        self._survivors = tuple(alive)
        return self._survivors

    def _build_spec(self) -> LaunchSpec:
        try:
            return self._spec_factory()
        except Exception as exc:
            raise self._refuse(
                (Refusal("recipe", f"cannot build the launch spec: {exc}"),), keep_state=True
            ) from exc

    def _launch(self, spec: LaunchSpec, reason: str) -> EngineHandle:
        self._backoff_until = None
        self._capture.begin_session()
        handle = self._launcher.start(spec)
        self._launch_record = LaunchRecord(
            launch_id=uuid.uuid4().hex,
            argv=spec.argv,
            env=dict(spec.env),
            recipe_hash=spec.recipe_hash,
            spec_hash=handle.record.spec_hash,
            pid=handle.pid,
            adopted=False,
            started_at=_utcnow(),
        )
        self._crash_class = None
        self._attach(handle)
        self._set_state(ServingState.STARTING, f"{reason}; launched pid {handle.pid}")
        self._next_probe = self._clock() + min(self._settings.probe_interval_s, 1.0)
        self._emit(
            ServingChange.LAUNCH,
            Severity.OK,
            f"engine launched (pid {handle.pid}): {shlex.join(mask_argv(list(spec.argv)))}",
            launch=self._launch_record,
        )
        return handle

    def _attach(self, handle: EngineHandle) -> None:
        self._handle = handle
        self._target = ProbeTarget(handle.record.base_url, handle.record.served_model_name)
        self._url = handle.record.base_url
        self._starting_since = self._clock()
        self._ready_since = None
        self._health_failures = 0
        self._metrics = None
        self._scraper.reset()
        watcher = threading.Thread(
            target=self._watch, args=(handle,), name=f"engine-watch:{handle.pid}", daemon=True
        )
        watcher.start()

    def _watch(self, handle: EngineHandle) -> None:
        """Wait for the engine to end and tell the loop (a thread per engine)."""
        while not self._closed.is_set() and self._handle is handle:
            try:
                ended = self._launcher.wait(handle, _WATCH_SLICE_S)
            except (LauncherError, OSError):
                _LOG.exception("waiting on the engine (pid %d) failed", handle.pid)
                ended = False
                self._closed.wait(_WATCH_SLICE_S)
            if ended:
                if not self._closed.is_set():
                    self._commands.put(_Command("exited", {"handle": handle}))
                return

    def _auto_start(self) -> None:
        """The end of a backoff: preflight again, then launch (a restart)."""
        self._backoff_until = None
        try:
            self._run_preflight(keep_state=True)
            spec = self._build_spec()
        except StartRefused as refused:
            self._set_state(
                ServingState.STOPPED,
                "automatic restart refused: " + "; ".join(r.message for r in refused.refusals),
            )
            return
        self._restarts += 1
        self._restart_times.append(self._clock())
        self._save_restarts()
        try:
            self._launch(spec, reason=f"automatic restart #{self._restarts}")
        except Exception as exc:  # any failure must lead to the next try, never a stuck loop
            _LOG.exception("automatic restart failed")
            self._emit(ServingChange.CRASH, Severity.WARNING, f"engine restart failed: {exc}")
            self._schedule_restart(f"launch failed: {exc}")

    def _find_engine(self) -> EngineHandle | None:
        try:
            record = self._launcher.read_record()
        except RecordError as exc:
            self._emit(ServingChange.WARNING, Severity.WARNING, f"cannot adopt the engine: {exc}")
            return None
        handle: EngineHandle | None = None
        try:
            if record is not None:
                handle = self._launcher.adopt(record)
                if handle is None:
                    # The recorded engine is gone: the record is stale.
                    stale = EngineHandle(key="stale", record=record, adopted=True)
                    self._launcher.release(stale)
            if handle is None:
                handle = self._adopt_unrecorded()
        except LauncherError as exc:
            self._emit(ServingChange.WARNING, Severity.WARNING, f"cannot adopt the engine: {exc}")
            return None
        return handle

    def _adopt_unrecorded(self) -> EngineHandle | None:
        """A container found by name though no record names it (a lost state dir)."""
        try:
            spec = self._spec_factory()
        except Exception as exc:
            _LOG.info("no launch spec to look for an unrecorded engine: %s", exc)
            return None
        return self._launcher.adopt_running(spec)

    def _warn_if_outdated(self, record: EngineRecord) -> None:
        try:
            current = spec_hash(self._spec_factory())
        except Exception as exc:
            _LOG.warning("cannot compare the adopted engine with the current recipe: %s", exc)
            return
        if current != record.spec_hash:
            self._emit(
                ServingChange.WARNING,
                Severity.WARNING,
                "the adopted engine runs an older launch spec than the current recipe: "
                "restart it to apply the recipe",
            )

    # ==================================================================================
    # Probing
    # ==================================================================================

    def _probe(self, now: float) -> None:
        handle, target = self._handle, self._target
        self._next_probe = now + self._settings.probe_interval_s
        if handle is None or target is None:
            return
        if not self._launcher.is_alive(handle):
            self._engine_ended()
            return
        if self._state is ServingState.STARTING:
            result = self._prober.ready(target)
            if result.ok:
                self._became_ready(now)
            elif now - self._starting_since >= self._settings.startup_timeout_s:
                self._unhealthy(
                    f"not ready after {self._settings.startup_timeout_s:g} s ({result.detail})"
                )
            return
        result = self._prober.health(target)
        if result.ok:
            self._health_failures = 0
        else:
            self._health_failures += 1
            if self._health_failures >= self._settings.liveness_failures:
                self._unhealthy(
                    f"{self._health_failures} health probes failed in a row ({result.detail})"
                )
                return
        if (
            self._ready_since is not None
            and self._failures_in_a_row
            and now - self._ready_since >= self._settings.backoff_reset_after_s
        ):
            self._failures_in_a_row = 0
        if now >= self._next_metrics:
            self._next_metrics = now + self._settings.metrics_interval_s
            try:
                self._metrics = self._scraper.scrape(target.metrics_url)
            except MetricsError as exc:
                _LOG.warning("engine metrics: %s", exc)

    def _became_ready(self, now: float) -> None:
        self._ready_since = now
        self._next_metrics = now
        self._health_failures = 0
        if self._launch_record is not None:
            self._launch_record = replace(self._launch_record, ready_at=_utcnow())
            self._emit(
                ServingChange.LAUNCH,
                Severity.OK,
                f"engine ready (pid {self._launch_record.pid})",
                launch=self._launch_record,
            )
        self._set_state(ServingState.READY, "serving")

    def _unhealthy(self, reason: str) -> None:
        self._set_state(ServingState.UNHEALTHY, reason, severity=Severity.WARNING)
        self._begin_stop(f"restarting: {reason}", f"restarting: {reason}", then="backoff")

    # ==================================================================================
    # Stopping
    # ==================================================================================

    def _begin_stop(
        self, reason: str, final_reason: str, then: str, waiter: Future[Any] | None = None
    ) -> None:
        handle = self._handle
        plan = _StopPlan(reason=reason, final_reason=final_reason, then=then)
        if waiter is not None:
            plan.waiters.append(waiter)
        self._backoff_until = None
        if handle is None:
            self._stop_plan = plan
            self._finish_stop(plan)
            return
        self._stop_plan = plan
        plan.deadline = self._clock() + self._settings.stop_timeout_s
        self._set_state(ServingState.STOPPING, reason)
        try:
            self._launcher.signal_stop(handle, graceful=True)
        except LauncherError as exc:
            self._stop_failed(f"cannot signal the engine: {exc}")

    def _escalate_stop(self) -> None:
        plan, handle = self._stop_plan, self._handle
        if plan is None or handle is None:
            return
        settings = self._settings
        try:
            if plan.phase == "graceful":
                plan.phase = "term"
                plan.deadline = self._clock() + settings.term_timeout_s
                self._emit(
                    ServingChange.WARNING,
                    Severity.WARNING,
                    f"engine (pid {handle.pid}) still runs {settings.stop_timeout_s:g} s after "
                    "SIGINT: sending SIGTERM",
                )
                self._launcher.signal_stop(handle, graceful=False)
            elif plan.phase == "term" and settings.allow_kill:
                plan.phase = "kill"
                plan.deadline = self._clock() + settings.kill_wait_s
                self._emit(
                    ServingChange.WARNING,
                    Severity.CRITICAL,
                    f"engine (pid {handle.pid}) ignored SIGINT and SIGTERM: sending SIGKILL "
                    "(allow_kill); stranded CUDA contexts may need a reboot",
                )
                self._launcher.kill(handle)
            elif plan.phase == "term":
                self._stop_failed(
                    f"stop stuck: reboot recommended (engine pid {handle.pid} ignored SIGINT "
                    f"and SIGTERM for {settings.stop_timeout_s + settings.term_timeout_s:g} s; "
                    "nothing was killed)"
                )
            else:
                self._stop_failed(
                    f"stop stuck: reboot required (engine pid {handle.pid} survived SIGKILL)"
                )
        except LauncherError as exc:
            self._stop_failed(f"cannot signal the engine: {exc}")

    def _stop_failed(self, reason: str) -> None:
        plan = self._stop_plan
        self._stop_plan = None
        self._set_state(ServingState.FAILED, reason, severity=Severity.CRITICAL)
        self._emit(ServingChange.STOP_STUCK, Severity.CRITICAL, reason, launch=self._launch_record)
        if plan is not None:
            for waiter in plan.waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def _finish_stop(self, plan: _StopPlan) -> None:
        """The engine ended after we asked it to: go where the plan says."""
        self._stop_plan = None
        waiters = plan.waiters
        if plan.then == "backoff":
            self._schedule_restart(plan.reason.removeprefix("restarting: "))
        elif plan.then == "start":
            self._set_state(ServingState.STOPPED, "restarting by request")
            try:
                result = self._manual_start()
            except StartRefused as refused:
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_exception(refused)
                return
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(result)
            return
        else:
            self._set_state(ServingState.STOPPED, plan.final_reason)
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # ==================================================================================
    # Exits, backoff, breaker
    # ==================================================================================

    def _engine_ended(self) -> None:
        handle = self._handle
        if handle is None:
            return
        try:
            exit_code, signal = split_returncode(self._launcher.exit_code(handle))
        except LauncherError as exc:
            _LOG.warning("engine exit code unknown: %s", exc)
            exit_code, signal = None, None
        self._capture.poll()  # after exit_code: a launcher may add its verdict to the log
        survivors = self._launcher.survivors(handle)
        self._survivors = tuple(survivors)
        self._launcher.release(handle)
        self._handle = None
        self._target = None
        self._metrics = None
        how = _describe_exit(exit_code, signal)
        plan = self._stop_plan
        if survivors:
            self._emit(
                ServingChange.WARNING,
                Severity.WARNING,
                f"{len(survivors)} process(es) of the engine's group still run after it ended "
                f"(pids {', '.join(map(str, survivors))}): they may hold GPU memory",
            )
        if plan is not None or self._state is ServingState.FAILED:
            reason = plan.reason if plan is not None else "exited after the stop was reported stuck"
            self._end_launch(exit_code, signal, None, f"stopped ({reason}); {how}")
            if plan is not None:
                self._finish_stop(plan)
            else:
                self._set_state(
                    ServingState.STOPPED, f"engine {how} after the stop was reported stuck"
                )
            return
        verdict = explain_exit(
            self._capture.session_tail(self._settings.classify_tail_lines), exit_code, signal
        )
        self._crash_class = verdict.crash_class
        phase = "while starting" if self._state is ServingState.STARTING else "while serving"
        message = f"engine {how} {phase}: {verdict.crash_class}"
        if verdict.evidence:
            message += f" ({verdict.evidence})"
        self._end_launch(exit_code, signal, verdict.crash_class, message)
        self._emit(
            ServingChange.CRASH,
            Severity.CRITICAL
            if verdict.crash_class is not CrashClass.UNKNOWN
            else Severity.WARNING,
            message,
            crash_class=verdict.crash_class,
            evidence=verdict.evidence,
            advice=verdict.advice,
            launch=self._launch_record,
        )
        self._schedule_restart(f"engine {how}: {verdict.crash_class}")

    def _end_launch(
        self, exit_code: int | None, signal: int | None, crash: CrashClass | None, reason: str
    ) -> None:
        if self._launch_record is None:
            return
        self._launch_record = replace(
            self._launch_record,
            ended_at=_utcnow(),
            exit_code=exit_code,
            signal=signal,
            crash_class=crash,
            end_reason=reason,
        )
        self._emit(
            ServingChange.LAUNCH,
            Severity.OK,
            f"engine launch ended: {reason}",
            launch=self._launch_record,
        )

    def _schedule_restart(self, reason: str) -> None:
        settings = self._settings
        if not settings.restart_on_failure:
            self._set_state(ServingState.STOPPED, f"{reason}; automatic restart is off")
            return
        now = self._clock()
        self._failures_in_a_row += 1
        while self._restart_times and now - self._restart_times[0] > settings.breaker_window_s:
            self._restart_times.popleft()
        if len(self._restart_times) >= settings.breaker_max_restarts:
            held = (
                f"{reason}; {len(self._restart_times)} restarts within "
                f"{settings.breaker_window_s:g} s: held until a person starts it"
            )
            self._set_state(ServingState.HELD, held, severity=Severity.CRITICAL)
            self._emit(ServingChange.BREAKER, Severity.CRITICAL, held)
            return
        delay = settings.backoff_delay_s(self._failures_in_a_row)
        self._backoff_until = now + delay
        self._set_state(
            ServingState.BACKOFF,
            f"{reason}; restarting in {delay:g} s (failure {self._failures_in_a_row} in a row)",
        )

    # ==================================================================================
    # State, events, status
    # ==================================================================================

    def _set_state(
        self, state: ServingState, reason: str | None, severity: Severity = Severity.OK
    ) -> None:
        changed = state is not self._state or reason != self._reason
        self._state = state
        self._reason = reason
        if not changed:
            return
        self._since = _utcnow()
        self._publish()
        self._emit(ServingChange.STATE, severity, f"serving {state}: {reason or ''}".rstrip(": "))

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
    ) -> None:
        event = ServingEvent(
            kind=kind,
            ts=_utcnow(),
            state=self._state,
            severity=severity,
            message=message,
            crash_class=crash_class,
            evidence=evidence,
            advice=advice,
            launch=launch,
            refusals=refusals,
        )
        try:
            self._on_event(event)
        except Exception:
            _LOG.exception("the serving event handler failed for %s", kind)

    def _build_status(self) -> ServingStatus:
        remaining = None
        if self._state is ServingState.BACKOFF and self._backoff_until is not None:
            remaining = max(self._backoff_until - self._clock(), 0.0)
        return ServingStatus(
            state=self._state,
            pid=None if self._handle is None else self._handle.pid,
            restarts=self._restarts,
            since=self._since,
            url=self._url,
            reason=self._reason,
            crash_class=self._crash_class,
            metrics=self._metrics,
            adopted=self._handle is not None and self._handle.adopted,
            backoff_remaining_s=remaining,
            last_refusal=self._last_refusal,
        )

    def _publish(self) -> None:
        status = self._build_status()
        with self._status_lock:
            self._status = status

    # ==================================================================================
    # Persistence of the restart count
    # ==================================================================================

    def _state_file(self) -> Path:
        return self._state_dir / SUPERVISOR_STATE_NAME

    def _load_restarts(self) -> int:
        path = self._state_file()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return max(int(data.get("restarts", 0)), 0)
        except FileNotFoundError:
            return 0
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            _LOG.warning("ignoring %s (%s): restart count starts at 0", path, exc)
            return 0

    def _save_restarts(self) -> None:
        path = self._state_file()
        try:
            self._state_dir.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(f".{path.name}.{os.getpid()}")
            temporary.write_text(json.dumps({"restarts": self._restarts}), encoding="utf-8")
            os.replace(temporary, path)
        except OSError:
            _LOG.exception("cannot save the restart count to %s", path)


_PENDING = object()
"""A command handler's answer meaning "the result comes later" (a stop in progress)."""


def _describe_exit(exit_code: int | None, signal: int | None) -> str:
    if signal is not None:
        return f"was killed by signal {signal}"
    if exit_code is not None:
        return f"exited with code {exit_code}"
    return "ended (exit status unknown)"


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
