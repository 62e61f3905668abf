"""fleetd started as a fork of an already-imported fleetd (``tests.support.prefork_server``).

``start`` returns a ``Forked`` that stands where ``subprocess.Popen`` stood (``pid``,
``args``, ``returncode``, ``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill``). The
process is real (its own pid, signals, descriptors, exit code, log); what it saves is the
interpreter's start and fleetd's imports, about 0.8 s of CPU a start (issue 38). A start
whose environment sets ``PYTHON*`` variables (they act when an interpreter starts) is not
for this: ``usable(env)`` says so and the caller runs ``Popen``. ``CMPFLEET_TEST_PREFORK=0``
turns it off for a run.
"""

from __future__ import annotations

import atexit
import io
import json
import locale
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

DISABLE_VARIABLE = "CMPFLEET_TEST_PREFORK"
SOCKET_VARIABLE = "CMPFLEET_TEST_PREFORK_SOCKET"  # a launcher shared by the run's workers
_START_TIMEOUT_S = 120.0


class Forked:
    """A fleetd forked by the launcher: what a test needs of ``subprocess.Popen``."""

    def __init__(self, args: list[str], pid: int, conn: socket.socket) -> None:
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self._conn = conn

    def _collect(self, timeout_s: float | None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        readable, _, _ = select.select([self._conn], [], [], timeout_s)
        if not readable:
            return None
        message = self._conn.recv(4096)
        self._conn.close()
        if not message:
            raise AssertionError(f"the fleetd launcher went away before pid {self.pid} ended")
        self.returncode = int(json.loads(message)["exit"])
        return self.returncode

    def poll(self) -> int | None:
        """The exit code, or None while it runs."""
        return self._collect(0)

    def wait(self, timeout: float | None = None) -> int:
        """The exit code once it ends; ``subprocess.TimeoutExpired`` after ``timeout``."""
        code = self._collect(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        """``sig`` to it, unless it has ended (as ``Popen.send_signal``)."""
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        """SIGTERM."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL."""
        self.send_signal(signal.SIGKILL)


class _Launcher:
    """This test process's launcher, started on first use and ended with the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._path = ""

    def _ensure(self, wait: bool = True) -> str:
        shared = os.environ.get(SOCKET_VARIABLE)
        if shared:
            return shared
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return self._path
            directory = tempfile.mkdtemp(prefix="cmpfleet-prefork-")
            self._path = os.path.join(directory, "launcher.sock")
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "tests.support.prefork_server", self._path],
                stdin=subprocess.PIPE,  # its lifeline: EOF when this process is gone
                stdout=subprocess.PIPE,
                cwd=str(Path(__file__).resolve().parents[2]),
            )
            atexit.register(self.close)
            assert self._proc.stdout is not None
            if wait:
                line = self._proc.stdout.readline()
                if line != b"ready\n":
                    raise AssertionError(f"the fleetd launcher did not start: {line!r}")
            return self._path

    def share(self) -> None:
        """Start the launcher now, named in the environment for the processes started next.

        The xdist controller calls it: its workers then fork from this one launcher (one
        import of fleetd for the run, not one per worker). Not waited for: it imports while
        the workers collect, and a request made before it is ready waits in its queue.
        """
        os.environ[SOCKET_VARIABLE] = self._ensure(wait=False)

    def close(self) -> None:
        """End the launcher (EOF on its stdin) and wait for it."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def start(
        self,
        program: str,
        args: list[str],
        *,
        env: dict[str, str],
        stdin: int,
        stdout: int,
        stderr: int,
        umask: int = -1,
        cwd: str | None = None,
    ) -> Forked:
        """Fork ``PROGRAM ARGS`` with these descriptors on 0-2."""
        path = self._ensure()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            conn.connect(path)
        except OSError as exc:
            conn.close()
            raise AssertionError(f"the fleetd launcher at {path} is not answering: {exc}") from None
        request = {
            "program": program,
            "args": args,
            "env": env,
            "cwd": cwd or os.getcwd(),
            "umask": umask,
        }
        socket.send_fds(conn, [json.dumps(request).encode()], [stdin, stdout, stderr])
        deadline = time.monotonic() + _START_TIMEOUT_S
        readable, _, _ = select.select([conn], [], [], max(deadline - time.monotonic(), 0))
        message = conn.recv(4096) if readable else b""
        if not message:
            conn.close()
            raise AssertionError("the fleetd launcher did not fork")
        pid = int(json.loads(message)["pid"])
        return Forked([sys.executable, "-m", program, *args], pid, conn)


_LAUNCHER = _Launcher()


def share() -> None:
    """One launcher for the processes this one starts from now on (``_Launcher.share``)."""
    if os.environ.get(DISABLE_VARIABLE) != "0":
        _LAUNCHER.share()


def usable(env: dict[str, str]) -> bool:
    """Whether a start with this environment can be a fork (no interpreter flags in it)."""
    if os.environ.get(DISABLE_VARIABLE) == "0":
        return False
    return not any(
        name.startswith("PYTHON") and env.get(name) != os.environ.get(name) for name in env
    )


def start(
    args: list[str],
    *,
    env: dict[str, str],
    stdout: int,
    stderr: int,
    umask: int = -1,
    program: str = "daemon.fleetd",
) -> Forked:
    """``python -m PROGRAM ARGS`` as a fork of the launcher (stdin: ``/dev/null``)."""
    with open(os.devnull, "rb") as null:
        return _LAUNCHER.start(
            program, args, env=env, stdin=null.fileno(), stdout=stdout, stderr=stderr, umask=umask
        )


def run(
    program: str,
    args: list[str],
    *,
    env: dict[str, str],
    stdin: str | None = None,
    timeout_s: float = 120,
    cwd: str | None = None,
    umask: int = -1,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([python, -m, PROGRAM, *ARGS], capture_output=True, text=True)``, forked.

    stdout and stderr are pipes, as ``capture_output`` makes them; stdin is ``stdin``'s text
    (a temp file, so a large one never blocks the fork) or ``/dev/null``.
    """
    with tempfile.TemporaryFile() as given:
        given.write((stdin or "").encode())
        given.seek(0)
        err_r, err_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            child = _LAUNCHER.start(
                program,
                args,
                env=env,
                stdin=given.fileno(),
                stdout=out_w,
                stderr=err_w,
                umask=umask,
                cwd=cwd,
            )
        finally:
            os.close(out_w)
            os.close(err_w)
        chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
        open_fds = [out_r, err_r]
        deadline = time.monotonic() + timeout_s
        try:
            while open_fds:
                left = deadline - time.monotonic()
                readable, _, _ = select.select(open_fds, [], [], max(left, 0))
                if not readable:
                    child.kill()
                    raise subprocess.TimeoutExpired(child.args, timeout_s)
                for fd in readable:
                    data = os.read(fd, 65536)
                    if data:
                        chunks[fd].append(data)
                    else:
                        open_fds.remove(fd)
            code = child.wait(max(deadline - time.monotonic(), 1))
        finally:
            os.close(out_r)
            os.close(err_r)
    return subprocess.CompletedProcess(
        child.args,
        code,
        _text(b"".join(chunks[out_r])),
        _text(b"".join(chunks[err_r])),
    )


def _text(data: bytes) -> str:
    """Bytes read as ``subprocess.run(text=True)`` reads them (universal newlines)."""
    return io.TextIOWrapper(io.BytesIO(data), encoding=locale.getpreferredencoding(False)).read()
