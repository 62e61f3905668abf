"""fleetd's stop signals: the first SIGTERM or SIGINT asks for a clean stop, a second exits at once.

Why a thread reading the wakeup fd, not the handler itself: Python runs a signal's handler in
the main thread only, between two bytecodes, while the kernel gives a signal sent to the
process to any of its threads that does not block it. One that landed on another thread
while the main thread waited (shutting down, for a stubborn engine to stop on exit, up to
``stop_timeout_s``) was handled only when that wait ended: a second SIGTERM did not cut the
shutdown short (a loaded test run waited 5 s for it, in vain). CPython's C-level handler
writes each signal's number to the wakeup fd on whichever thread it runs; the ``signals``
thread reads it at once and acts. The Python handler does nothing (it must be there: only a
signal with a Python handler is written to the fd).

Not ``pthread_sigmask`` with ``sigwait``: a blocked signal stays blocked in every process
fleetd spawns (the engine among them), which would then ignore its own stop signal.
"""

from __future__ import annotations

import logging
import os
import select
import signal
from collections.abc import Callable
from types import FrameType

from hwcheck.threads import run_in_thread

log = logging.getLogger("fleetd")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
SECOND_SIGNAL_EXIT_CODE = 1
SECOND_SIGNAL_LINE = b"fleetd: second signal, exiting now\n"


def _noop(_signum: int, _frame: FrameType | None) -> None:
    """The Python-level handler: the ``signals`` thread does the work (see the module)."""


class StopSignals:
    """Installs the handlers and the thread; ``request_stop`` is called on the first signal."""

    def __init__(self, request_stop: Callable[[], None]) -> None:
        self._request_stop = request_stop
        self._seen = 0

    def install(self) -> None:
        """From the main thread (Python's rule for handlers and the wakeup fd)."""
        read_fd, write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        for number in STOP_SIGNALS:
            signal.signal(number, _noop)
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        run_in_thread("signals", lambda: self._watch(read_fd), log=log)

    def _watch(self, read_fd: int) -> None:
        stops = {int(number) for number in STOP_SIGNALS}
        while True:
            select.select([read_fd], [], [])
            try:
                numbers = os.read(read_fd, 512)
            except BlockingIOError:
                continue
            for number in numbers:
                if number in stops:
                    self._received()

    def _received(self) -> None:
        """One stop signal: the first asks for a clean stop, the next exits now."""
        self._seen += 1
        if self._seen > 1:
            os.write(2, SECOND_SIGNAL_LINE)
            os._exit(SECOND_SIGNAL_EXIT_CODE)
        self._request_stop()
