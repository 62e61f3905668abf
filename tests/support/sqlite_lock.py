"""Another process holding ``fleet.db``'s write lock, as a backup or a stray ``sqlite3`` would.

A real second process (not a second connection in the test): fleetd must live with a lock
it cannot see the end of.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
conn.execute("BEGIN " + sys.argv[2])
print("locked", flush=True)
time.sleep(float(sys.argv[3]))
"""


@contextmanager
def lock_held(db_path: Path, mode: str = "IMMEDIATE", hold_s: float = 300) -> Iterator[None]:
    """``BEGIN <mode>`` on ``db_path`` in a child process for the block (at most ``hold_s``)."""
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(db_path), mode, str(hold_s)],
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "locked"
            yield
        finally:
            holder.kill()
