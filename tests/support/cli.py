"""Running ``fleetctl`` as a user does: a real process, its stdout, stderr and exit code."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support import prefork

EXIT_OUTPUT_CLOSED = 141  # what a shell shows for a process killed by SIGPIPE


def run_fleetctl(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``fleetctl ARGS`` with this interpreter; never raises on a non-zero exit.

    A real process, forked from the suite's launcher (``tests.support.prefork``: no
    interpreter start, no imports) unless ``env`` sets interpreter variables.
    """
    child_env = {**os.environ, **(env or {})}
    if prefork.usable(child_env):
        return prefork.run("daemon.fleetctl", list(args), env=child_env, stdin=stdin)
    return subprocess.run(
        [sys.executable, "-m", "daemon.fleetctl", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


@contextmanager
def _environment(env: dict[str, str] | None) -> Iterator[None]:
    """``os.environ`` with ``env`` added, put back as it was afterwards."""
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _stream() -> io.TextIOWrapper:
    """A text stream over bytes (``.buffer`` as a real one has), never a terminal."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)


def _stdin(text: str) -> io.TextIOWrapper:
    """``text`` as a stdin with a descriptor (``xid scan -`` reads the descriptor itself)."""
    file = tempfile.TemporaryFile()  # noqa: SIM115 (closed by the caller)
    file.write(text.encode())
    file.seek(0)
    return io.TextIOWrapper(file, encoding="utf-8")


def run_fleetctl_here(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``fleetctl ARGS`` in this process, through the same ``main`` the console script runs.

    For the tests whose subject is a command's answer, not the process boundary: no
    interpreter start and no import per call (about 0.4 s of CPU each, which a loaded
    2-core machine pays many hundred times a run). stdout and stderr are pipes to the
    command as in ``run_fleetctl`` (never a terminal); the exit code is what ``main``
    exits with. Signals, terminals, closed pipes and the start-up itself need
    ``run_fleetctl``, the real process.

    The streams, ``sys.argv`` and the environment are the process's own, so a call from any
    thread but the main one (a test driving several daemons at once) runs the real process.
    """
    if threading.current_thread() is not threading.main_thread():
        return run_fleetctl(*args, stdin=stdin, env=env)
    from daemon.fleetctl import main

    out, err, given = _stream(), _stream(), _stdin(stdin or "")
    streams = (sys.stdin, sys.stdout, sys.stderr, sys.argv)
    code: int = 0
    with _environment(env), given:
        sys.stdin, sys.stdout, sys.stderr = given, out, err
        sys.argv = ["fleetctl", *args]
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            sys.stdin, sys.stdout, sys.stderr, sys.argv = streams
    return subprocess.CompletedProcess(
        ["fleetctl", *args],
        code,
        out.buffer.getvalue().decode(),  # type: ignore[attr-defined]
        err.buffer.getvalue().decode(),  # type: ignore[attr-defined]
    )


def fleetctl_into_closed_pipe(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """fleetctl with stdout a pipe nobody reads any more; stderr captured."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "daemon.fleetctl", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, **(env or {})},
        )
    finally:
        os.close(write_end)


def one_clean_line(stderr: str, program: str = "fleetctl") -> str:
    """The single ``PROGRAM: ...`` line a failure must print (never a traceback); returns it."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"{program}: "), lines[0]
    return lines[0]
