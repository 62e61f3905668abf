"""A directory made read-only under a running fleetd: a bind mount over it, remounted ro.

Root only (a non-root run skips the test that asks). The kernel refuses the read-only
remount (EBUSY, ``mount`` exits 32) while a write through the mount is in flight, e.g.
fleetd opening a file for writing that moment: a busy mount is tried again, for 5 s.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

BUSY_TRIES = 50
BUSY_PAUSE_S = 0.1


def make_read_only(point: Path, mounted: list[Path]) -> None:
    """Bind-mount ``point`` over itself and remount it read-only (``mounted`` gets it)."""
    done = subprocess.run(
        ["mount", "--bind", str(point), str(point)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount here (needs root): {done.stderr.strip()}")
    mounted.append(point)
    for _ in range(BUSY_TRIES):
        done = subprocess.run(
            ["mount", "-o", "remount,ro,bind", str(point)],
            check=False,
            capture_output=True,
            text=True,
        )
        if done.returncode == 0:
            return
        time.sleep(BUSY_PAUSE_S)
    raise AssertionError(f"could not remount {point} read-only: {done.stderr.strip()}")
