"""Running ``fleetctl`` as a user does: a real process, its stdout, stderr and exit code."""

from __future__ import annotations

import os
import subprocess
import sys

EXIT_OUTPUT_CLOSED = 141  # what a shell shows for a process killed by SIGPIPE


def run_fleetctl(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``fleetctl ARGS`` with this interpreter; never raises on a non-zero exit."""
    return subprocess.run(
        [sys.executable, "-m", "daemon.fleetctl", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
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
