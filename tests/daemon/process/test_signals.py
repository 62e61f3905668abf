"""fleetd's stop signals act at once on whichever thread the kernel gives them to.

A process's signal goes to any thread that does not block it, and Python runs handlers in
the main thread only, between bytecodes: a second SIGTERM that landed beside a main thread
waiting for a stubborn engine was handled only when that wait ended (``daemon/signals.py``).
Here the signals go to another thread on purpose (``pthread_kill``) while the main thread
waits with no timeout, in a real process.
"""

from __future__ import annotations

import subprocess
import sys

from daemon.signals import SECOND_SIGNAL_EXIT_CODE, SECOND_SIGNAL_LINE
from tests.support.waiting import DEADLINE_SCALE

SCRIPT = """
import signal, threading
from daemon.signals import StopSignals

asked = threading.Event()
StopSignals(lambda: (print("stop requested", flush=True), asked.set())).install()
other = threading.Thread(target=threading.Event().wait, daemon=True)
other.start()
signal.pthread_kill(other.ident, signal.SIGTERM)
asked.wait()  # no timeout: only the signals thread can end it
signal.pthread_kill(other.ident, signal.SIGINT)
threading.Event().wait()  # forever, unless the second signal ends the process
"""


def test_a_stop_signal_on_another_thread_acts_at_once_and_a_second_exits() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        timeout=10 * DEADLINE_SCALE,
        check=False,
    )
    assert done.stdout == b"stop requested\n"
    assert done.stderr == SECOND_SIGNAL_LINE
    assert done.returncode == SECOND_SIGNAL_EXIT_CODE
