"""A reader that stops reading (``fleetctl ... | head -1``) is not an error of fleetctl's.

Python ignores SIGPIPE, so a write to a closed pipe raises ``BrokenPipeError`` from
wherever it happens: rich's console (which would otherwise exit 1 on its own), a JSON
document, a followed log, click's help. Typer turns an ``EPIPE`` that reaches it into a
bare exit 1, so the group below converts it first into ``OutputClosed``, which typer
lets through to ``fleetctl``'s ``main``; that ends every command the same quiet way.
SIGPIPE is not reset to its default instead: fleetctl also writes to sockets, and a
daemon closing one must be an error message, not a silent death.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from typer.core import TyperGroup

# What a shell reports for a process killed by SIGPIPE (128 + 13), as `yes | head` gives.
EXIT_OUTPUT_CLOSED = 141


class OutputClosed(Exception):
    """Whoever read fleetctl's output went away before it was all written."""


class PipeSafeGroup(TyperGroup):
    """The top-level command group: a closed stdout anywhere below becomes ``OutputClosed``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """Top-level ``--help`` (and the usage shown for no arguments) is printed here."""
        try:
            return super().parse_args(ctx, args)
        except BrokenPipeError as exc:
            raise OutputClosed from exc

    def invoke(self, ctx: Any) -> Any:
        """Every command (and its own ``--help``) runs inside this call."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise OutputClosed from exc


class PipeConsole(Console):
    """A rich console that reports a closed pipe instead of exiting 1 by itself."""

    def on_broken_pipe(self) -> None:
        """Called by rich when its write fails with ``EPIPE``."""
        self.quiet = True  # nothing more from this console
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def silence_closed_output(streams: Sequence[Any] = (sys.stdout, sys.stderr)) -> None:
    """Point the closed streams' descriptors at /dev/null so the exit flush stays quiet.

    Python flushes stdout once more at exit; with the reader gone that flush would print
    "Exception ignored ... BrokenPipeError". Whatever is still buffered goes nowhere.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in streams:
            try:
                stream.flush()
            except BrokenPipeError:
                os.dup2(devnull, stream.fileno())
    finally:
        os.close(devnull)
