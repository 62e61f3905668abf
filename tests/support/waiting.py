"""The one way a test waits: poll a condition against a deadline, never a bare sleep.

Every test module imports ``wait_until`` from here (``tests.support.fleetd`` re-exports it):
a failure names what was awaited and for how long.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

# Every deadline is one only a broken run reaches, never a speed the test asserts (a speed
# is measured by bench/): on a 2-core machine at load 8 to 18 a fleetd start or an engine's
# answer took several times its quiet time, and a deadline sized for a quiet machine failed
# CI. So each is stretched by this factor; a test that passes waits no longer for it, and
# one that fails takes longer to say so. CMPFLEET_TEST_DEADLINE_SCALE=1 gives them as written.
DEADLINE_SCALE = float(os.environ.get("CMPFLEET_TEST_DEADLINE_SCALE", "3"))


# After the first seconds of a wait, the pause between two looks grows from ``interval_s``
# to ``LONGEST_PAUSE_S``: most predicates ask a daemon for its whole status, which costs it
# (and the test) CPU at each look, and at a fixed 50 ms the suite's long waits were a good
# part of its CPU on 2 cores. The first seconds keep the short pause, so a state that holds
# only briefly soon after the wait began (an engine ready for 0.1 s before its simulated
# crash) is still seen; a condition met late is seen at most 250 ms after.
STEADY_S = 2.0
LONGEST_PAUSE_S = 0.25
GROWTH = 1.5


def wait_until(
    predicate: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.05
) -> None:
    """Poll ``predicate()`` until true; fail naming ``what`` after ``timeout_s`` (scaled)."""
    timeout_s *= DEADLINE_SCALE
    started = time.monotonic()
    deadline = started + timeout_s
    pause_s = interval_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(pause_s)
        if time.monotonic() - started > STEADY_S:
            pause_s = max(interval_s, min(pause_s * GROWTH, LONGEST_PAUSE_S))
    if predicate():  # one last look: a slow machine may have got there at the deadline
        return
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
