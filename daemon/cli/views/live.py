"""A full-screen view redrawn every interval until ``q``: the loop under ``fleet top``.

Kept apart from what is drawn so any live view can use it: the caller hands in a function
that builds one frame as lines for a screen size (it must not raise for a daemon that is
away; it draws that instead), called again at every refresh with the terminal's size then,
so a resized window is filled at the next refresh. With stdout not a terminal it prints
one frame, plain and unlimited, and returns, for scripts and tests.

The keyboard is read on a daemon thread with the terminal in cbreak mode (keys arrive at
once, unechoed, Ctrl-C still interrupts) and restored on every way out; the main thread
waits on an event, so ``q`` quits at once instead of at the next refresh.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import termios
import threading
import tty
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.live import Live
from rich.text import Text

from daemon.cli.views.rigview import Screen
from daemon.cli.views.screen import Line, plain, to_rich
from hwcheck.threads import ServiceThread

QUIT_KEYS = frozenset({"q", "Q"})
KEY_POLL_S = 0.1


def run_live(console: Console, draw: Callable[[Screen], list[Line]], interval_s: float) -> None:
    """Draw ``draw(screen)`` every ``interval_s`` until ``q`` (one frame when not a terminal)."""
    if not console.is_terminal:
        sys.stdout.write(plain(draw(Screen())))
        return

    def frame() -> Text:
        size = console.size
        return to_rich(draw(Screen(size.width, size.height)))

    quit_event = threading.Event()
    try:
        with (
            _keys_quit(quit_event),
            Live(frame(), console=console, screen=True, auto_refresh=False) as live,
        ):
            while not quit_event.wait(interval_s):
                live.update(frame(), refresh=True)
    finally:
        # Ctrl-C can land inside Live's __enter__, after it switched to the alternate screen
        # and hid the cursor but before the with block owned it: then no __exit__ undoes that,
        # and the shell would come back on a blank screen with no cursor.
        if console.is_alt_screen:
            console.set_alt_screen(False)
            console.show_cursor(True)


@contextlib.contextmanager
def _keys_quit(quit_event: threading.Event) -> Iterator[None]:
    """Watch stdin for a quit key while the block runs (nothing to watch: no keys)."""
    fd = sys.stdin.fileno() if sys.stdin is not None and sys.stdin.isatty() else None
    if fd is None:
        yield
        return
    saved = termios.tcgetattr(fd)
    reader = ServiceThread("live-keys", lambda wake: _read_keys(fd, quit_event, wake.stop_event))
    tty.setcbreak(fd)
    try:
        reader.start()
        yield
    finally:
        reader.stop(1)
        # TCSANOW, not TCSADRAIN: draining waits until the terminal took every byte, and a
        # terminal that takes none (output paused with Ctrl-S, a stalled ssh session) would
        # hang the way out, Ctrl-C included. The mode bits restored here do not touch output.
        termios.tcsetattr(fd, termios.TCSANOW, saved)


def _read_keys(fd: int, quit_event: threading.Event, stop: threading.Event) -> None:
    """Set ``quit_event`` on a quit key or end of input; return when ``stop`` is set."""
    while not stop.is_set():
        ready, _, _ = select.select([fd], [], [], KEY_POLL_S)
        if not ready:
            continue
        key = os.read(fd, 1).decode(errors="replace")
        if key == "" or key in QUIT_KEYS:
            quit_event.set()
            return
