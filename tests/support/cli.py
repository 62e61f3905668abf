"""Running ``fleetctl`` as a user does: a real process, its stdout, stderr and exit code."""

from __future__ import annotations

import os
import subprocess
import sys


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
