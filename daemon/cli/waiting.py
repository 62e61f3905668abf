"""Waiting on one long request to fleetd (a confirmed reboot, a canary round) like a person would.

Such a request lasts as long as the work behind it (the engine's clean stop: minutes; a
canary round: four engine requests), far past the client's usual 10 s. It runs in a
background thread while the main one calls ``tick`` about once a second (a progress line
on a terminal), and Ctrl-C ends only the waiting: fleetd carries on with what it started,
so the line says so and fleetctl exits 130.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Generic, NoReturn, TypeVar

from daemon.cli.client import ClientError
from daemon.cli.output import EXIT_INTERRUPTED, Output
from hwcheck.threads import run_in_thread

TICK_S = 1.0
Answer = TypeVar("Answer")


def end_progress() -> None:
    """End a live progress line on a terminal, so the next line starts on its own."""
    if sys.stderr.isatty():
        sys.stderr.write("\n")
        sys.stderr.flush()


def stopped_waiting(out: Output, carries_on: str) -> NoReturn:
    """Ctrl-C while waiting: end the progress line, say what fleetd goes on doing, exit 130."""
    end_progress()
    out.fail(f"stopped waiting: {carries_on}", EXIT_INTERRUPTED)


def show_elapsed(out: Output, started_s: float, text: str) -> None:
    """``[m:ss] text`` rewritten in place on a terminal; nothing into a pipe (no log spam)."""
    if not sys.stderr.isatty():
        return
    elapsed = int(time.monotonic() - started_s)
    line = f"[{elapsed // 60:d}:{elapsed % 60:02d}] {text}"
    width = out.err.width - 1
    out.err.file.write("\r" + line[:width].ljust(width))
    out.err.file.flush()


class _Call(Generic[Answer]):
    """One request in the background; ``done`` is set when it answered or failed."""

    def __init__(self, call: Callable[[], Answer]) -> None:
        self._call = call
        self.done = threading.Event()
        self.answer: Answer | None = None
        self.error: ClientError | None = None

    def run(self) -> None:
        """Make the call and keep its answer or its error."""
        try:
            self.answer = self._call()
        except ClientError as exc:
            self.error = exc
        finally:
            self.done.set()


def answer_while_waiting(
    out: Output,
    call: Callable[[], Answer],
    tick: Callable[[float], None],
    interrupted: str,
) -> Answer:
    """``call()``'s answer (its ``ClientError`` raised here), ``tick(started_s)`` meanwhile.

    ``interrupted`` is the line for Ctrl-C: what fleetd goes on doing without fleetctl.
    """
    request: _Call[Answer] = _Call(call)
    started_s = time.monotonic()
    run_in_thread("fleetctl-request", request.run)  # a daemon thread: Ctrl-C never waits
    try:
        while not request.done.wait(TICK_S):
            tick(started_s)
    except KeyboardInterrupt:
        stopped_waiting(out, interrupted)
    if time.monotonic() - started_s >= TICK_S:
        end_progress()
    if request.error is not None:
        raise request.error
    return request.answer  # type: ignore[return-value]  # done without error: answered
