"""Run a child that talks to the GPU driver, with a hard time limit, and never kill it -9.

The CUDA probe and the memory test each load ``libcuda.so.1`` in a child process: a
wedged card can hang a driver call forever, and only a separate process can be left
behind. On timeout the child gets SIGTERM and a short grace; one still stuck in the
driver is abandoned (its pid logged), never SIGKILLed: a process stuck in the driver with
a CUDA context is exactly what must not be killed -9 (it can take the driver with it).
"""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

_LOG = logging.getLogger(__name__)
TERM_GRACE_S = 2.0


@dataclass(frozen=True, slots=True)
class ChildRun:
    """What the child printed (all of it, or up to the timeout) and whether it timed out."""

    stdout: str
    timed_out: bool


def run_child(argv: Sequence[str], env: dict[str, str], timeout_s: float, what: str) -> ChildRun:
    """Run ``argv`` (stdout captured as text, no stdin, stderr dropped) within ``timeout_s``."""
    child = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        out, _ = child.communicate(timeout=timeout_s)
        return ChildRun(out or "", timed_out=False)
    except subprocess.TimeoutExpired:
        child.terminate()
        try:
            out, _ = child.communicate(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            _LOG.warning("%s pid %d hangs in the driver; abandoned (never killed)", what, child.pid)
            out = ""
        return ChildRun(out or "", timed_out=True)


def json_records(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects a child printed, one per line (anything else is skipped)."""
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            yield record
