"""A real terminal for full-screen commands: a pty of a given size, read until drawn."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time


def spawn_in_pty(
    argv: list[str], rows: int = 50, cols: int = 220, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``argv`` on a fresh pseudo-terminal (``TERM=xterm-256color``); (process, master).

    ``env`` adds variables (after ``NO_COLOR``, ``LINES`` and ``COLUMNS`` are dropped).
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    # LINES/COLUMNS (pytest-xdist workers carry 24x80) would override the pty's own size.
    dropped = ("NO_COLOR", "TERM", "LINES", "COLUMNS")
    kept = {k: v for k, v in os.environ.items() if k not in dropped}
    proc = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=kept | {"TERM": "xterm-256color"} | (env or {}),
    )
    os.close(slave)
    return proc, master


def read_until(
    master: int,
    needle: bytes,
    timeout_s: float,
    *,
    count: int = 1,
    seen: bytearray | None = None,
) -> bytes:
    """Read the terminal until ``needle`` was drawn ``count`` times by what this call read.

    ``seen`` (when given) collects everything read, across calls.
    """
    seen = bytearray() if seen is None else seen
    start = len(seen)
    deadline = time.monotonic() + timeout_s
    while seen[start:].count(needle) < count:
        left = deadline - time.monotonic()
        drawn = seen[start:].count(needle)
        assert left > 0, f"{needle!r} drawn {drawn} times in {timeout_s} s, wanted {count}"
        ready, _, _ = select.select([master], [], [], left)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    assert seen[start:].count(needle) >= count, f"{needle!r} never drawn {count} times"
    return bytes(seen[start:])


def read_to_end(master: int, timeout_s: float, seen: bytearray) -> bytes:
    """Read what the terminal still holds until the child closed it (or ``timeout_s``).

    A needle read first may arrive in an earlier chunk than the lines drawn after it: a
    test that looks at the whole screen reads it all once the child has exited.
    """
    start = len(seen)
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([master], [], [], left)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal: all of it is read
            break
        if not chunk:
            break
        seen += chunk
    return bytes(seen[start:])
