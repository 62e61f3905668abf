"""A reader that stops reading (``fleetctl ... | head -1``) is not an error of fleetctl's.

Python ignores SIGPIPE, so a write to a closed pipe raises ``BrokenPipeError`` from
wherever it happens: rich's console (which would otherwise exit 1 on its own), a JSON
document, a followed log, click's help. Typer turns an ``EPIPE`` that reaches it into a
bare exit 1, so the group below converts it first into ``OutputClosed``, which typer
lets through to ``fleetctl``'s ``main``; that ends every command the same quiet way.
SIGPIPE is not reset to its default instead: fleetctl also writes to sockets, and a
daemon closing one must be an error message, not a silent death.

The two hooks live beside their users (``output.PipeConsole``, ``app.PipeSafeGroup``):
this module imports neither rich nor typer, so ``fleetctl --version`` stays cheap.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

# What a shell reports for a process killed by SIGPIPE (128 + 13), as `yes | head` gives.
EXIT_OUTPUT_CLOSED = 141


class OutputClosed(Exception):
    """Whoever read fleetctl's output went away before it was all written."""


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
