"""On an 80x24 terminal ``status`` keeps its verdict on screen and ``events`` keeps each
event short (issue 37: on ``stock-kernel`` status took 38 lines, the engine's
"last start refused" repeating every fix, and one launch took 12 lines of events); each
event's message takes at most three lines under or beside its row.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator

import pytest

from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until
from tests.support.terminal import read_until, spawn_in_pty

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("stock-kernel")
    daemon = start_fleetd(tmp, tmp / "state", simulate="stock-kernel")
    try:
        wait_until(
            lambda: daemon.get("/api/v1/status").json()["serving"].get("refusal") is not None,
            90,
            "the refused autostart",
        )
        yield daemon
    finally:
        stop_all([daemon])


def _screen(rig: Fleetd, *args: str, last: bytes) -> list[str]:
    argv = [sys.executable, "-m", "daemon.fleetctl", "--url", rig.url, *args]
    proc, master = spawn_in_pty(argv, rows=24, cols=80)
    try:
        seen = bytearray()
        read_until(master, last, 60, seen=seen)
        proc.wait(timeout=60)
    finally:
        os.close(master)
    text = ANSI.sub(b"", bytes(seen)).decode("utf-8", errors="replace").replace("\r", "")
    return text.rstrip("\n").split("\n")


def test_status_fits_the_screen_with_its_verdict_on_top(rig: Fleetd) -> None:
    lines = _screen(rig, "status", last=b"status --verbose)")
    assert lines[0].startswith("overall: CRITICAL"), lines
    assert len(lines) <= 23, "\n".join(lines)  # the prompt's line stays free
    refused = [line for line in lines if "last start refused" in line]
    assert refused == ["    last start refused (critical_check): by the causes shown here"]


def test_events_give_one_event_at_most_three_lines(rig: Fleetd) -> None:
    lines = _screen(rig, "events", last=b"fleetd started")
    starts = [n for n, line in enumerate(lines) if re.match(r"^ *\d+  \d\d-\d\d ", line)]
    assert starts, lines
    heights = [b - a for a, b in zip(starts, [*starts[1:], len(lines)], strict=True)]
    assert max(heights) <= 1 + 3, "\n".join(lines)  # its row, then 3 lines of message
    assert any(line.endswith("…") for line in lines)  # a long message is cut, marked
