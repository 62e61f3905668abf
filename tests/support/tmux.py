"""A real terminal screen of a given size: a program run in tmux, its screen captured as text.

A pty (``terminal.py``) gives the bytes a program wrote; tmux gives what a person sees
after the terminal applied them: lines of exactly the screen's width, nothing beyond the
last row. Each screen has its own tmux server (``-L``), so parallel tests never meet.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tests.support.external import require_program
from tests.support.fleetd import wait_until


@dataclass
class TmuxScreen:
    """One program on a detached tmux screen of ``cols`` x ``rows``."""

    tmux: str
    socket: str
    cols: int
    rows: int

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.tmux, "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )

    def capture(self) -> list[str]:
        """The screen now, one string per row (tmux drops each row's trailing blanks)."""
        shown = self._run("capture-pane", "-p", "-t", "view")
        assert shown.returncode == 0, f"tmux capture-pane failed: {shown.stderr}"
        rows = shown.stdout.split("\n")[: self.rows]
        return rows + [""] * (self.rows - len(rows))

    def wait_for(self, text: str, timeout_s: float = 30) -> list[str]:
        """The first screen that shows ``text``."""
        seen: list[list[str]] = []

        def shown() -> bool:
            seen.append(self.capture())
            return any(text in row for row in seen[-1])

        wait_until(shown, timeout_s, f"{text!r} on the {self.cols}x{self.rows} screen")
        return seen[-1]

    def keys(self, *keys: str) -> None:
        """Type ``keys`` into the program."""
        self._run("send-keys", "-t", "view", *keys)


@contextmanager
def tmux_screen(argv: list[str], cols: int, rows: int) -> Iterator[TmuxScreen]:
    """Run ``argv`` on a fresh ``cols`` x ``rows`` tmux screen; ended on the way out."""
    tmux = require_program("tmux", "tmux")
    screen = TmuxScreen(tmux, f"cmpfleet-test-{uuid.uuid4().hex[:12]}", cols, rows)
    dropped = ("NO_COLOR", "LINES", "COLUMNS", "TMUX")  # the screen's size is the one asked
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    started = subprocess.run(
        [tmux, "-L", screen.socket, "-f", "/dev/null", "new-session", "-d", "-s", "view",
         "-x", str(cols), "-y", str(rows), shlex.join(argv)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )  # fmt: skip
    assert started.returncode == 0, f"tmux new-session failed: {started.stderr}"
    try:
        yield screen
    finally:
        screen._run("kill-server")
