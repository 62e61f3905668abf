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
import os
import selectors
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

_LOG = logging.getLogger(__name__)
TERM_GRACE_S = 2.0


@dataclass(frozen=True, slots=True)
class ChildRun:
    """What the child printed (all of it, or up to the timeout) and whether it timed out."""

    stdout: str
    timed_out: bool


def _spawn(argv: Sequence[str], env: dict[str, str], text: bool) -> subprocess.Popen[Any]:
    """The child with its stdout on a pipe, no stdin, stderr dropped."""
    return subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=env,
        text=text,
    )


def run_child(argv: Sequence[str], env: dict[str, str], timeout_s: float, what: str) -> ChildRun:
    """Run ``argv`` (stdout captured as text, no stdin, stderr dropped) within ``timeout_s``."""
    child = _spawn(argv, env, text=True)
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


def run_child_streaming(
    argv: Sequence[str],
    env: dict[str, str],
    *,
    silence_s: float,
    limit_s: float,
    what: str,
    on_line: Callable[[str], None],
) -> ChildRun:
    """Run ``argv`` handing each stdout line to ``on_line`` as it comes.

    A child silent for ``silence_s`` (a card hung in the driver stops printing) or still
    running after ``limit_s`` is treated as ``run_child`` treats a timeout: SIGTERM, a
    short grace, then abandoned, never killed.
    """
    child = _spawn(argv, env, text=False)
    stdout = child.stdout
    if stdout is None:  # stdout=PIPE always gives one
        raise RuntimeError("no pipe from the child")
    fd = stdout.fileno()
    os.set_blocking(fd, False)
    lines: list[str] = []
    pending = b""
    started_s = last_s = time.monotonic()
    timed_out = False
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            wait_s = min(last_s + silence_s, started_s + limit_s) - time.monotonic()
            if wait_s <= 0:
                timed_out = True
                break
            if not selector.select(wait_s):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            last_s = time.monotonic()
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                line = raw.decode("utf-8", "replace")
                lines.append(line)
                on_line(line)
    stdout.close()
    if timed_out:
        child.terminate()
    try:
        child.wait(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        _LOG.warning("%s pid %d hangs in the driver; abandoned (never killed)", what, child.pid)
    return ChildRun("\n".join(lines), timed_out=timed_out)
