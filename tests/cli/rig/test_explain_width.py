"""``fleetctl explain`` wraps to the terminal it is shown on, not at 88 columns."""

from __future__ import annotations

import os
import re
import sys

from tests.support.terminal import read_until, spawn_in_pty

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def _explained(cols: int) -> list[str]:
    proc, master = spawn_in_pty(
        [sys.executable, "-m", "daemon.fleetctl", "explain", "xid", "31"], rows=60, cols=cols
    )
    try:
        seen = bytearray()
        read_until(master, b"why that step", 60, seen=seen)
        assert proc.wait(timeout=60) == 0
    finally:
        os.close(master)
    text = ANSI.sub(b"", bytes(seen)).decode("utf-8", errors="replace")
    return [line.rstrip() for line in text.replace("\r", "").splitlines() if line.strip()]


def test_a_narrow_terminal_gets_lines_that_fit_and_a_wide_one_uses_its_width() -> None:
    narrow = _explained(60)
    assert max(len(line) for line in narrow) <= 60, narrow
    wide = _explained(160)
    assert max(len(line) for line in wide) > 88, wide  # not the old 88 columns
    assert len(wide) < len(narrow)
