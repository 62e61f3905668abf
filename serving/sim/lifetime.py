"""The simulated engine ends with the test session that started it, however that ends.

A simulated engine outlives fleetd by design (as a real one must), so a test session that
is stopped (``scripts/dev test`` SIGTERM'd, a CI timeout, a killed xdist worker) left its
engines running, one of them ignoring signals (``--sim-ignore-signals``). The test suite
names its process in ``$SIM_ENGINE_WATCH_PID`` (``tests/conftest.py``); a simulated engine
started under it, by fleetd or a test, watches that process (a pidfd: no confusion with a
reused pid) and exits at once when it is gone, whatever signals it ignores. Unset (a
person's ``scripts/dev run``), nothing is watched. The variable is not a ``CMPFLEET_`` one,
so fleetd hands it to the engines it starts.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from collections.abc import Callable, Mapping

WATCH_VARIABLE = "SIM_ENGINE_WATCH_PID"
CHECK_EVERY_S = 0.5  # only without pidfd_open (a kernel before 5.3)

log = logging.getLogger(__name__)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait_for_end(pid: int, stop: threading.Event) -> bool:
    """Block until ``pid`` ends (True) or ``stop`` is set (False)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except OSError:
        pidfd = None
    try:
        while not stop.is_set():
            if pidfd is not None:
                ready, _, _ = select.select([pidfd], [], [], CHECK_EVERY_S)
                if ready:
                    return True
            elif not _alive(pid):
                return True
            else:
                stop.wait(CHECK_EVERY_S)
        return False
    finally:
        if pidfd is not None:
            os.close(pidfd)


def end_with_watched_process(
    environ: Mapping[str, str] = os.environ,
    exit_now: Callable[[int], None] = os._exit,
    stop: threading.Event | None = None,
) -> threading.Thread | None:
    """Watch ``$SIM_ENGINE_WATCH_PID``; ``exit_now(0)`` when it ends. None: nothing to watch."""
    text = environ.get(WATCH_VARIABLE, "")
    if not text.isdecimal():
        return None
    pid = int(text)
    halt = stop or threading.Event()

    def watch() -> None:
        if _wait_for_end(pid, halt):
            log.warning("the process that started this simulated engine (%d) ended: exiting", pid)
            exit_now(0)

    thread = threading.Thread(target=watch, name="sim-engine-lifetime", daemon=True)
    thread.start()
    return thread
