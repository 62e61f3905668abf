"""Run a real ``fleetd`` process for tests, with a real ``NOTIFY_SOCKET`` peer.

The peer is an ``AF_UNIX`` datagram socket bound in a temp dir, exactly what systemd
gives a ``Type=notify`` service; tests read ``READY=1``/``WATCHDOG=1``/``STOPPING=1``
from it instead of sleeping.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from daemon.statedir import StateDir
from tests.support import loopback, prefork
from tests.support.waiting import DEADLINE_SCALE, wait_until

__all__ = ["wait_until"]  # re-exported: most tests take it from here


# Below the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by default).
_QUIET_PORTS = range(20000, 32000)
_WORKER_SLICES = 16  # more than the suite's xdist workers


def _own_ports() -> range:
    """This xdist worker's share of the quiet ports (all of them outside xdist).

    Each worker picks only from its own slice, so a port one worker handed out and has not
    bound yet (a webhook receiver that is down on purpose) is never another worker's pick:
    a test failed with EADDRINUSE so when it started its receiver seconds later.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    number = worker[2:] if worker.startswith("gw") else ""
    if not number.isdecimal():
        return _QUIET_PORTS
    size = len(_QUIET_PORTS) // _WORKER_SLICES
    start = _QUIET_PORTS.start + (int(number) % _WORKER_SLICES) * size
    return range(start, start + size)


_handed_out: dict[int, None] = {}  # in the order handed out


def free_port() -> int:
    """A loopback port free now that stays free until someone binds it on purpose.

    Not the kernel's pick (a bind to port 0): that is an ephemeral port, which any
    outgoing connection of another xdist worker may take before the daemon, engine or
    test meant to bind it does (a test failed so under load). A port below the ephemeral
    range is only ever taken by a bind that names it; each worker picks from its own
    slice (``_own_ports``) and none is handed out twice by one worker (until its slice is
    spent), so two ports picked before either is bound never clash.
    """
    ports = _own_ports()
    if len(_handed_out) >= len(ports) - 50:  # the slice nearly spent: the oldest half again
        for old in list(_handed_out)[: len(_handed_out) // 2]:
            del _handed_out[old]
    for _ in range(2000):
        port = random.choice(ports)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out[port] = None
        return port
    raise AssertionError("no free loopback port below the ephemeral range")


_SUN_PATH_MAX = 107
_SO_TIMESTAMPNS = 35  # Linux's socket option (and its ancillary type); Python names neither
_TIMESPEC = struct.Struct("@qq")  # struct timespec on a 64-bit Linux


class NotifyPeer:
    """A datagram socket standing in for systemd's notify socket."""

    def __init__(self, directory: Path) -> None:
        name = f"notify-{uuid.uuid4().hex[:8]}.sock"
        # sockaddr_un holds 107 bytes of path: pytest-xdist's deep temp dirs can exceed it,
        # so a long directory gives way to a short private one (removed on close).
        self._own_dir: Path | None = None
        if len(os.fsencode(directory / name)) > _SUN_PATH_MAX:
            self._own_dir = directory = Path(tempfile.mkdtemp(prefix="cmpfleet-notify-"))
        self.path = directory / name
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        self.sock.bind(str(self.path))
        # Each datagram as (when fleetd sent it, its text). The kernel stamps a Unix datagram
        # as it is sent: a test starved of CPU reads several at once, and its own clock would
        # read them as sent together (at a load of 19 on one core, 0.5 s pings 10 us apart).
        # The stamp is the wall clock (CLOCK_REALTIME, the kernel's only choice here).
        self.messages: list[tuple[float, str]] = []

    def receive(self, timeout_s: float) -> str | None:
        """One datagram, or None after ``timeout_s``."""
        self.sock.settimeout(timeout_s)
        try:
            data, ancillary, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(_TIMESPEC.size))
        except TimeoutError:
            return None
        sent_s = time.time()
        for level, kind, value in ancillary:
            if (level, kind) == (socket.SOL_SOCKET, _SO_TIMESTAMPNS):
                seconds, nanoseconds = _TIMESPEC.unpack(value[: _TIMESPEC.size])
                sent_s = seconds + nanoseconds / 1e9
        text = data.decode()
        self.messages.append((sent_s, text))
        return text

    def wait_for(self, needle: str, timeout_s: float) -> str:
        """Receive until a datagram contains ``needle``; fail after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            message = self.receive(left)
            if message is not None and needle in message.splitlines():
                return message
        seen = [m for _, m in self.messages][-5:]
        raise AssertionError(f"no {needle!r} from fleetd within {timeout_s} s; last: {seen}")

    def close(self) -> None:
        """Close and remove the socket."""
        self.sock.close()
        self.path.unlink(missing_ok=True)
        if self._own_dir is not None:
            self._own_dir.rmdir()


@dataclass
class Fleetd:
    """A running fleetd child process."""

    state_dir: Path
    port: int
    proc: subprocess.Popen[bytes] | prefork.Forked
    peer: NotifyPeer | None
    log_path: Path
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """Base URL of its API."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        """The API token it created."""
        return StateDir(self.state_dir).token.read_text().strip()

    def get(self, path: str) -> httpx.Response:
        """GET on its API (10 s, stretched as every deadline is: the first ``/openapi.json``
        builds the schema, which took over 10 s at load 10)."""
        return loopback.get(self.url + path, timeout=10 * DEADLINE_SCALE)

    def post(
        self, path: str, body: object = None, token: str | None = "auto", timeout_s: float = 10
    ) -> httpx.Response:
        """POST with the bearer token (``token=None``: without one).

        ``timeout_s``: longer for a request that answers once a move is done (a confirmed
        reboot stops every engine first).
        """
        headers = {}
        if token == "auto":
            headers["Authorization"] = f"Bearer {self.token}"
        elif token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return loopback.post(
            self.url + path, json=body or {}, headers=headers, timeout=timeout_s * DEADLINE_SCALE
        )

    def log(self) -> str:
        """Everything it wrote to stderr so far."""
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30) -> int:
        """Send ``sig`` and wait for the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout_s)


PORT_TRIES = 3


def start_fleetd(
    tmp: Path,
    state_dir: Path,
    *,
    simulate: str | None = "healthy",
    config: Path | None = None,
    env: dict[str, str] | None = None,
    notify: bool = True,
    port: int | None = None,
    # A deadline only a broken fleetd reaches: on a 2-core machine at load 18 a start took
    # 17 s to its first record and was still going at 30 s (the waiting costs nothing when
    # it starts in time, and a fleetd that exits fails at once).
    ready_timeout_s: float = 90,
    extra_args: list[str] | None = None,
    umask: int = -1,
    wrapper: list[str] | None = None,
) -> Fleetd:
    """Start fleetd and wait for ``READY=1`` (or for /healthz when ``notify`` is off).

    ``umask`` (when not -1) is the child's, e.g. 0 to show modes do not depend on it.
    ``wrapper`` is a command prefix that execs fleetd (a sandbox, e.g. ``setpriv ... --``).
    A port this helper picked can be taken by another process (another xdist worker's
    daemon or engine) between the pick and fleetd's bind: then it tries a fresh port.
    """
    for attempt in range(1, PORT_TRIES + 1):
        try:
            return _start_once(
                tmp,
                state_dir,
                simulate=simulate,
                config=config,
                env=env,
                notify=notify,
                port=port or free_port(),
                ready_timeout_s=ready_timeout_s,
                extra_args=extra_args,
                umask=umask,
                wrapper=wrapper,
            )
        except PortTaken:
            if port is not None or attempt == PORT_TRIES:
                raise
    raise AssertionError("unreachable")


class PortTaken(AssertionError):
    """fleetd could not bind the port it was given."""


def _start_once(
    tmp: Path,
    state_dir: Path,
    *,
    simulate: str | None,
    config: Path | None,
    env: dict[str, str] | None,
    notify: bool,
    port: int,
    ready_timeout_s: float,
    extra_args: list[str] | None,
    umask: int,
    wrapper: list[str] | None = None,
) -> Fleetd:
    peer = NotifyPeer(tmp) if notify else None
    argv = [*(wrapper or []), sys.executable, "-m", "daemon.fleetd", "--state-dir", str(state_dir)]
    argv += ["--listen", f"127.0.0.1:{port}"]
    if simulate:
        argv += ["--simulate", simulate]
    if config:
        argv += ["--config", str(config)]
    argv += extra_args or []
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("CMPFLEET_")}
    # A quick poll (2 s by default; an idle fleetd's CPU follows it: 0.75 s costs a fifth
    # less than 0.5 s did), and a simulated engine that loads in 1 s rather than the
    # scenarios' 5 s (a scenario or a test's env that sets its own load time keeps it).
    child_env.update({"CMPFLEET_POLL_INTERVAL_S": "0.75", "CMPFLEET_SIM_ENGINE_READY_AFTER_S": "1"})
    if peer is not None:
        child_env["NOTIFY_SOCKET"] = str(peer.path)
    child_env.update(env or {})
    log_path = tmp / f"fleetd-{port}.log"
    proc: subprocess.Popen[bytes] | prefork.Forked
    with log_path.open("wb") as log_file:
        if wrapper is None and prefork.usable(child_env):
            fd = log_file.fileno()
            proc = prefork.start(argv[3:], env=child_env, stdout=fd, stderr=fd, umask=umask)
        else:
            proc = subprocess.Popen(
                argv, stdout=log_file, stderr=subprocess.STDOUT, env=child_env, umask=umask
            )
    daemon = Fleetd(state_dir=state_dir, port=port, proc=proc, peer=peer, log_path=log_path)
    try:
        if peer is not None:
            _wait_ready(peer, proc, ready_timeout_s)
        else:
            wait_until(lambda: _answers(daemon), ready_timeout_s, "fleetd /healthz")
    except AssertionError:
        proc.kill()
        proc.wait()
        if peer is not None:
            peer.close()
        log = daemon.log()
        failure = PortTaken if f":{port}: Address already in use" in log else AssertionError
        raise failure(f"fleetd did not become ready:\n{log}") from None
    return daemon


def _wait_ready(
    peer: NotifyPeer, proc: subprocess.Popen[bytes] | prefork.Forked, timeout_s: float
) -> None:
    """``READY=1`` within ``timeout_s``; a fleetd that exits fails at once, not at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            peer.wait_for("READY=1", min(1.0, max(deadline - time.monotonic(), 0.01)))
            return
        except AssertionError:
            if proc.poll() is not None or time.monotonic() >= deadline:
                raise


def _answers(daemon: Fleetd) -> bool:
    if daemon.proc.poll() is not None:
        raise AssertionError(f"fleetd exited with {daemon.proc.returncode}:\n{daemon.log()}")
    try:
        return daemon.get("/healthz").status_code == 200
    except httpx.HTTPError:
        return False


def run_fleetd(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """fleetd run to completion (for start-up refusals); never raises on its exit code.

    A fork of the suite's launcher (``tests.support.prefork``) unless that is turned off.
    """
    if prefork.usable({}):
        return prefork.run("daemon.fleetd", list(args), env=dict(os.environ), timeout_s=timeout_s)
    return subprocess.run(
        [sys.executable, "-m", "daemon.fleetd", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def kill_engine(state_dir: Path) -> None:
    """SIGKILL the engine a test's fleetd left behind (it outlives fleetd by design).

    Only tests do this: the product never SIGKILLs an engine unless ``allow_kill``.
    """
    pid_file = StateDir(state_dir).engine_record
    try:
        pid = int(json.loads(pid_file.read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def latch_by_xid(daemon: Fleetd, card: int = 1, xid: int = 79) -> None:
    """A simulated hardware Xid (``/api/v1/sim/xid``), then wait until the latch is set."""
    answer = daemon.post("/api/v1/sim/xid", {"card": card, "xid": xid})
    assert answer.status_code == 200, answer.text
    wait_until(
        lambda: daemon.get("/api/v1/status").json()["recovery"]["reboot_required"],
        30,
        "the latch",
    )


def stop_all(daemons: Iterator[Fleetd] | list[Fleetd]) -> None:
    """Kill whatever is still running, engines included (test teardown)."""
    for daemon in daemons:
        if daemon.proc.poll() is None:
            daemon.proc.kill()
            daemon.proc.wait()
        kill_engine(daemon.state_dir)
        if daemon.peer is not None:
            daemon.peer.close()
