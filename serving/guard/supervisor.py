"""fleetd's side of the guard process: start it, sync with it, restart it when it dies.

One thread, apart from the poller and recovery: a flood of client traffic, a guard stuck
or a guard crash-looping never delays a poll, an Xid or a recovery move. Each tick
(the poll interval) it tells the guard where the engine is, its state and the profile
in force, and reads back the counters (``on_report``). A guard that exits, or stops
answering for ``HUNG_AFTER_S``, is restarted after a backoff that doubles up to
``BACKOFF_MAX_S`` (reset after ``STABLE_S`` of good running); each start, exit and
restart is reported (``on_change``). The engine is never touched.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from hwcheck.threads import CrashReport, ServiceThread, Wake
from serving.guard.control import SYNC_PATH
from serving.guard.settings import SETTINGS_ENV, TOKEN_ENV, GuardSettings

log = logging.getLogger("fleetd.guard")

BACKOFF_MIN_S = 1.0
BACKOFF_MAX_S = 60.0
STABLE_S = 60.0
HUNG_AFTER_S = 30.0
SYNC_TIMEOUT_S = 2.0
STOP_GRACE_S = 7.0  # the guard's own grace for streams in flight, and a little more


@dataclass(frozen=True, slots=True)
class EngineView:
    """What the guard is told each tick."""

    url: str | None
    state: str | None
    profile: str | None
    build: str | None = None  # the launch's recipe hash: sessions begun under another are stale
    max_num_seqs: int | None = None  # the engine's slots: the fair queue's capacity
    draining: str | None = None  # the rig drains: why (every request then gets a 503)
    # Several engines: each one's {model, url, state, profile, build, max_num_seqs}, the
    # first the ``serving`` one; the guard then routes by model (``serving.guard.routing``).
    engines: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class GuardChange:
    """A change of the guard process worth an event: started, exited, restarting, hung."""

    kind: str
    message: str
    pid: int | None = None
    exit_code: int | None = None


class GuardSupervisor:
    """Runs ``python -m serving.guard`` on two sockets fleetd bound, and keeps it running."""

    def __init__(
        self,
        settings: GuardSettings,
        public: socket.socket,
        control: socket.socket,
        engine: Callable[[], EngineView],
        on_report: Callable[[dict[str, Any]], None],
        on_change: Callable[[GuardChange], None],
        tick_s: float,
        on_crash: CrashReport | None = None,
    ) -> None:
        self._settings = settings
        self._public = public
        self._control = control
        self._engine = engine
        self._on_report = on_report
        self._on_change = on_change
        self._tick_s = tick_s
        self._token = os.urandom(24).hex()
        host, port = control.getsockname()[:2]
        self._sync_url = f"http://{host}:{port}{SYNC_PATH}"
        self._thread = ServiceThread("guard", self._run, on_crash=on_crash, log=log)
        self._proc: subprocess.Popen[bytes] | None = None
        self._started_s = 0.0
        self._last_answer_s = 0.0
        self._backoff_s = BACKOFF_MIN_S
        self._since_seq = 0
        self.restarts = 0
        self.up = False

    @property
    def address(self) -> str:
        """``HOST:PORT`` the guard listens on for agents."""
        host, port = self._public.getsockname()[:2]
        return f"{host}:{port}"

    def start(self) -> None:
        """Start the guard and the thread that keeps it."""
        self._thread.start()

    def sync_now(self) -> None:
        """Tell the guard now, not at the next tick (a drain begins or ends)."""
        self._thread.wake()

    def stop(self) -> None:
        """Stop the thread, then the guard (SIGTERM: streams in flight get their grace)."""
        self._thread.stop(SYNC_TIMEOUT_S + 1.0)
        self._end_process()
        self._public.close()
        self._control.close()

    # -- the thread ---------------------------------------------------------------------
    def _run(self, wake: Wake) -> None:
        client = httpx.Client(timeout=SYNC_TIMEOUT_S, trust_env=False)
        try:
            self._launch(wake)
            while wake.wait(self._tick_s):  # a wake (``sync_now``) syncs at once
                try:
                    self._tick(client, wake)
                except Exception:  # the guard's keeper must never die (3 a.m. rule)
                    log.exception("guard: tick failed (the next one still runs)")
        finally:
            client.close()

    def _tick(self, client: httpx.Client, wake: Wake) -> None:
        proc = self._proc
        if proc is None:
            return
        code = proc.poll()
        if code is not None:
            self._exited(code, wake)
            return
        self._sync(client)
        now_s = time.monotonic()
        if now_s - self._last_answer_s > HUNG_AFTER_S:
            self._on_change(
                GuardChange(
                    "hung",
                    f"guard pid {proc.pid} has not answered for {HUNG_AFTER_S:g} s: restarting it",
                    proc.pid,
                )
            )
            self._end_process()
            self._exited(None, wake)
        elif now_s - self._started_s > STABLE_S:
            self._backoff_s = BACKOFF_MIN_S

    def _sync(self, client: httpx.Client) -> None:
        view = self._engine()
        document = {
            "engine_url": view.url,
            "serving_state": view.state,
            "profile": view.profile,
            "build": view.build,
            "max_num_seqs": view.max_num_seqs,
            "draining": view.draining,
            "engines": list(view.engines),
            "since_seq": self._since_seq,
        }
        try:
            answer = client.post(
                self._sync_url,
                content=json.dumps(document),
                headers={"Authorization": f"Bearer {self._token}"},
            )
            report = answer.json() if answer.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            report = None
        if not isinstance(report, dict):
            self.up = False
            return
        self.up = True
        self._last_answer_s = time.monotonic()
        news = report.get("news") or []
        if news:
            self._since_seq = max(int(item.get("seq", 0)) for item in news)
        self._on_report(report)

    def _exited(self, code: int | None, wake: Wake) -> None:
        """The guard ended: report it, wait the backoff, start a new one."""
        self.up = False
        self._proc = None
        self._since_seq = 0  # a new guard numbers its news afresh
        if code is not None:
            self._on_change(
                GuardChange(
                    "exited",
                    f"guard exited with {_exit_words(code)}: restarting in {self._backoff_s:g} s "
                    "(the engine is not touched)",
                    exit_code=code,
                )
            )
        if not wake.rest(self._backoff_s):
            return
        self._backoff_s = min(self._backoff_s * 2, BACKOFF_MAX_S)
        self.restarts += 1
        self._launch(wake)

    def _launch(self, wake: Wake) -> None:
        env = {**os.environ, SETTINGS_ENV: self._settings.model_dump_json(), TOKEN_ENV: self._token}
        view = self._engine()
        argv = [sys.executable, "-m", "serving.guard", "--watch-parent"]
        argv += ["--listen-fd", str(self._public.fileno())]
        argv += ["--control-fd", str(self._control.fileno())]
        if view.url:
            argv += ["--engine-url", view.url]
        if view.draining:  # from its first request, not from the first sync
            argv += [f"--draining={view.draining}"]
        try:
            proc = subprocess.Popen(
                argv, env=env, pass_fds=(self._public.fileno(), self._control.fileno())
            )
        except OSError as exc:
            self._on_change(GuardChange("exited", f"guard could not start: {exc}"))
            self._exited(None, wake)
            return
        self._proc = proc
        self._started_s = self._last_answer_s = time.monotonic()
        self._on_change(
            GuardChange("started", f"guard pid {proc.pid} serving on {self.address}", proc.pid)
        )

    def _end_process(self) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()  # the guard holds no GPU state: a forced end strands nothing
            proc.wait()


def _exit_words(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
