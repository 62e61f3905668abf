"""Alert text sized for a phone: a summary a lock screen shows whole.

A summary up to 2,015 characters ending in "See `fleetctl events`" tells a person at
3 a.m. nothing. Every alert summary is at most ``LOCK_SCREEN_CHARS`` (about what a lock
screen's notification shows), cut at a word and marked; the full record stays in
``fleetctl events`` and the status.
"""

from __future__ import annotations

LOCK_SCREEN_CHARS = 200
_MORE = " ..."


def lock_screen(text: str, limit: int = LOCK_SCREEN_CHARS) -> str:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    room = limit - len(_MORE)
    cut = line.rfind(" ", 0, room + 1)
    head = line[: cut if cut > room // 2 else room].rstrip(" ,;:(")
    return head + _MORE
