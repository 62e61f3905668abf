"""The engine's supervisor: one state machine, one loop thread, typed commands through a queue.

Callers (API handlers, signal handlers, recovery's executors) never touch the state: they
enqueue a command (``commands``) and, if they want, wait for its result. The loop thread
waits on the queue with a timeout set to the next thing due (a probe, the end of a
backoff, a stop deadline), dispatches the command by its type, then does what is due. A
watcher thread per engine blocks on the launcher's ``wait`` and enqueues ``Exited`` the
moment the engine ends, so a crash is seen at once rather than at the next probe.

States are the documented ones (docs/reference.md "The engine"): ``stopped starting ready
unhealthy stopping backoff held failed``.
``held`` is only the crash breaker's; ``failed`` is a stop that did not take (the engine
ignored SIGINT and SIGTERM): it says "reboot recommended" and kills nothing unless
``allow_kill`` is set. Stopping fleetd leaves the engine running; the next supervisor on
the same state dir adopts it. What each command does is ``machine``'s.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from hwcheck.threads import CrashReport, ServiceThread, Wake
from serving.recipe.masking import KnownSecrets
from serving.recipe.spec import LaunchSpec
from serving.runtime.commands import (
    Adopt,
    ClearHold,
    Close,
    Command,
    Exited,
    Hold,
    Later,
    Request,
    Restart,
    RestartAfter,
    Start,
    StayStopped,
    Stop,
)
from serving.runtime.launchers import Launcher
from serving.runtime.logcapture import LogCapture
from serving.runtime.machine import ServingMachine
from serving.runtime.machine_core import LOG, EventSink, OomRecordLookup
from serving.runtime.preflight import Preflight
from serving.runtime.probes import new_probe_client
from serving.runtime.reports import EngineReports, NoReports
from serving.runtime.start_kind import StartFor
from serving.runtime.states import ServingStatus, StartRefused, StartResult, SupervisorClosed
from serving.settings import ServingSettings, SupervisorTuning


class Supervisor:
    """Starts, watches, restarts and stops one engine.

    ``spec_factory`` builds the launch spec at each start (so a changed recipe applies at
    the next start); ``preflight`` returns the mechanics that block a start (the port);
    ``on_event`` receives every :class:`ServingEvent` on the loop thread (keep it quick; a
    callback may enqueue commands, which then do not wait for their result). ``reports``
    hears of each run that ended on its own and of each backoff's end, and answers with a
    command (``restart_after``, ``hold``, ``stay_stopped``, ``start(kind=restart)``): the
    supervisor never decides that itself. ``known_secrets`` are masked in every line of
    the engine's log the supervisor hands out (give the current recipe's before ``open``
    loads the log's history; each launch adds its own as it starts). ``guard`` is called
    with the move's name before each move a caller asks for (start, stop, restart, the
    answers to a report, clearing a hold) and raises to forbid it: fleetd passes recovery's
    (``recovery.moves``), so no engine moves outside recovery's controller.
    """

    def __init__(
        self,
        spec_factory: Callable[[], LaunchSpec],
        launcher: Launcher,
        state_dir: Path,
        *,
        serving: ServingSettings,
        tuning: SupervisorTuning | None = None,
        preflight: Preflight = list,
        on_event: EventSink,
        reports: EngineReports | None = None,
        clock: Callable[[], float] = time.monotonic,
        known_secrets: KnownSecrets | None = None,
        on_crash: CrashReport | None = None,
        guard: Callable[[str], None] | None = None,
        oom_record: OomRecordLookup | None = None,
    ) -> None:
        tuning = tuning or SupervisorTuning()
        self._clock = clock
        self._guard = guard
        self._capture = LogCapture(
            launcher.log_path,
            max_bytes=tuning.log_max_bytes,
            backups=tuning.log_backups,
            tail_lines=tuning.log_tail_lines,
            poll_interval_s=tuning.log_poll_interval_s,
            secrets=known_secrets,
            on_crash=on_crash,
        )
        self._client = new_probe_client()
        self._requests: queue.Queue[Request] = queue.Queue()
        self._thread = ServiceThread("serving-supervisor", self._run, on_crash=on_crash, log=LOG)
        self._closed = threading.Event()
        self._submit_lock = threading.Lock()
        self._machine = ServingMachine(
            spec_factory,
            launcher,
            state_dir,
            self._capture,
            self._client,
            serving=serving,
            tuning=tuning,
            preflight=preflight,
            on_event=on_event,
            reports=reports or NoReports(),
            enqueue=self._requests.put,
            closed=self._closed,
            clock=clock,
            on_crash=on_crash,
            oom_record=oom_record,
        )

    # -- public API (any thread) ----------------------------------------------------------

    def open(self, adopt: bool = True, timeout_s: float | None = 30.0) -> bool:
        """Start the loop and adopt a running engine if one is recorded; True if adopted."""
        if self._thread.started:
            raise RuntimeError("supervisor is already open")
        self._machine.restore()
        self._capture.open()
        self._thread.start()
        if not adopt:
            self._machine.publish()
            return False
        return bool(self._submit(Adopt(), wait=True, timeout_s=timeout_s))

    def start(
        self,
        reason: str = "started by request",
        kind: StartFor = StartFor.PERSON,
        timeout_s: float | None = 60.0,
    ) -> StartResult:
        """Launch the engine; raises :class:`StartRefused` (the mechanics' reasons).

        A person's start clears a breaker hold; a no-op when already running. Called from
        the loop thread (an event handler) it is queued and returns an empty result.
        """
        self._check("start")
        result = self._submit(Start(reason, kind), wait=True, timeout_s=timeout_s)
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
        self._check("stop")
        self._submit(Stop(reason, hold_reason), wait=wait, timeout_s=timeout_s)
        return self.status()

    def restart(
        self,
        reason: str = "restart requested",
        wait: bool = True,
        timeout_s: float | None = None,
        kind: StartFor = StartFor.PERSON,
    ) -> StartResult:
        """Stop then start (a person's restart, decided by the caller).

        ``kind`` ``RECOVERY_RESTART``: recovery's (after a failing canary round), counted in
        the running restart total.
        """
        self._check("restart")
        result = self._submit(Restart(reason, kind), wait=wait, timeout_s=timeout_s)
        return result if isinstance(result, StartResult) else StartResult(None, False)

    def restart_after(self, delay_s: float, reason: str) -> None:
        """Answer an ended run: ``backoff`` for ``delay_s``, then report the backoff due."""
        self._check("restart_after")
        self._submit(RestartAfter(delay_s, reason), wait=False, timeout_s=None)

    def hold(self, reason: str) -> None:
        """Answer an ended run: the breaker holds the engine (``held``)."""
        self._check("hold")
        self._submit(Hold(reason), wait=False, timeout_s=None)

    def stay_stopped(self, reason: str) -> None:
        """Answer an ended run or a backoff's end: ``stopped`` with ``reason``."""
        self._check("stay_stopped")
        self._submit(StayStopped(reason), wait=False, timeout_s=None)

    def adopt(self, timeout_s: float | None = 30.0) -> bool:
        """Adopt the engine named in ``engine.pid`` if it still runs; True if adopted."""
        return bool(self._submit(Adopt(), wait=True, timeout_s=timeout_s))

    def clear_hold(self, timeout_s: float | None = 10.0) -> ServingStatus:
        """A person acknowledges the breaker: ``held`` becomes ``stopped`` (no start)."""
        self._check("clear_hold")
        self._submit(ClearHold(), wait=True, timeout_s=timeout_s)
        return self.status()

    def status(self) -> ServingStatus:
        """The current status (with the live last log line and backoff countdown)."""
        status = self._machine.status
        remaining = None
        if status.backoff_until_s is not None:
            remaining = max(status.backoff_until_s - self._clock(), 0.0)
        return replace(status, last_log_line=self._capture.last_line, backoff_remaining_s=remaining)

    def logs(self, n: int = 100) -> list[str]:
        """The engine's last ``n`` log lines."""
        return self._capture.tail(n)

    def launch_logs(self, n: int = 100) -> list[str]:
        """The current launch's last ``n`` lines, read up to now.

        Reads what the file gained first: the reader thread polls, so at the moment the
        engine answers ready its last lines may still be unread (the KV pool line a boot
        fingerprint needs); a plain tail then shows the previous launch's figures.
        """
        self._capture.poll()
        return self._capture.session_tail(n)

    @property
    def log_capture(self) -> LogCapture:
        """The log capture, for ``fleetctl logs --follow`` (``subscribe``/``follow``)."""
        return self._capture

    def close(self, stop_engine: bool = False, timeout_s: float | None = None) -> None:
        """Stop supervising. The engine keeps running unless ``stop_engine`` (stop_on_exit)."""
        if not self._thread.started:
            self._capture.close()
            self._client.close()
            return
        if stop_engine and not self._closed.is_set():
            self.stop("fleetd is shutting down (stop_on_exit)", wait=True, timeout_s=timeout_s)
        if not self._closed.is_set():
            with contextlib.suppress(SupervisorClosed):
                self._submit(Close(), wait=True, timeout_s=timeout_s)
        self._thread.join(timeout_s)
        self._capture.close()
        self._client.close()

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check(self, move: str) -> None:
        """The guard's word on a move asked for (raises to forbid it)."""
        if self._guard is not None:
            self._guard(move)

    def _submit(self, command: Command, *, wait: bool, timeout_s: float | None) -> Any:
        request = Request(command)
        # Checked and enqueued under the lock that close takes, so no command slips in
        # after the loop drained the queue (it would wait forever).
        with self._submit_lock:
            if self._closed.is_set() or not self._thread.started:
                raise SupervisorClosed(f"the supervisor is closed; cannot {_verb(command)}")
            self._requests.put(request)
        if not wait or self._thread.is_current():
            return None
        return request.result.result(timeout=timeout_s)

    # -- the loop -------------------------------------------------------------------------

    def _run(self, _wake: Wake) -> None:
        """The loop: one command or the machine's next due time (a queue wait), then a tick."""
        while True:
            try:
                request: Request | None = self._requests.get(timeout=self._machine.wait_s())
            except queue.Empty:
                request = None
            if request is not None and isinstance(request.command, Close):
                self._close_from_loop(request)
                return
            if request is not None:
                self._dispatch(request)
            try:
                self._machine.tick()
            except Exception:
                LOG.exception("the serving supervisor's tick failed; carrying on")
            self._machine.publish()

    def _dispatch(self, request: Request) -> None:
        machine = self._machine
        try:
            match request.command:
                case Start(reason=reason, kind=kind):
                    outcome: object = machine.start(reason, kind)
                case Stop() as stop:
                    outcome = machine.stop(stop, request.result)
                case Restart(reason=reason, kind=kind):
                    outcome = machine.restart(reason, request.result, kind)
                case RestartAfter(delay_s=delay_s, reason=reason):
                    machine.restart_after(delay_s, reason)
                    outcome = None
                case Hold(reason=reason):
                    machine.hold(reason)
                    outcome = None
                case StayStopped(reason=reason):
                    machine.stay_stopped(reason)
                    outcome = None
                case Adopt():
                    outcome = machine.adopt()
                case ClearHold():
                    machine.clear_hold()
                    outcome = None
                case Exited() as exited:
                    machine.exited(exited)
                    outcome = None
                case Close():  # handled by the loop before dispatch
                    outcome = None
        except Exception as exc:
            if not isinstance(exc, StartRefused):
                LOG.exception("serving command %s failed", _verb(request.command))
            if not request.result.done():
                request.result.set_exception(exc)
            return
        if outcome is not Later.PENDING and not request.result.done():
            request.result.set_result(outcome)

    def _close_from_loop(self, request: Request) -> None:
        with self._submit_lock:
            self._closed.set()
        self._machine.close()
        # Commands that arrived after close get a clear error rather than a hang.
        while True:
            try:
                pending = self._requests.get_nowait()
            except queue.Empty:
                break
            if not pending.result.done():
                pending.result.set_exception(SupervisorClosed("the supervisor closed"))
        request.result.set_result(None)


def _verb(command: Command) -> str:
    """The command's name as the old string commands spelled it (for messages and logs)."""
    names = {Start: "start", Stop: "stop", Restart: "restart", Adopt: "adopt"}
    names |= {ClearHold: "clear_hold", Exited: "exited", Close: "close"}
    names |= {RestartAfter: "restart_after", Hold: "hold", StayStopped: "stay_stopped"}
    return names[type(command)]
