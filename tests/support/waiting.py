"""The one way a test waits: poll a condition against a deadline, never a bare sleep.

Every test module imports ``wait_until`` from here (``tests.support.fleetd`` re-exports it):
a failure names what was awaited and for how long.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    predicate: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.05
) -> None:
    """Poll ``predicate()`` until true; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval_s)
    if predicate():  # one last look: a slow machine may have got there at the deadline
        return
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
