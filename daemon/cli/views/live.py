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
from collections.abc import Callable, Iterator, Mapping

from rich.console import Console
from rich.live import Live
from rich.text import Text

from daemon.cli.views.rigview import Screen
from daemon.cli.views.screen import Line, plain, to_rich
from hwcheck.threads import ServiceThread

QUIT_KEYS = frozenset({"q", "Q"})
KEY_POLL_S = 0.1


def run_live(
    console: Console,
    draw: Callable[[Screen], list[Line]],
    interval_s: float,
    keys: Mapping[str, Callable[[], None]] | None = None,
) -> None:
    """Draw ``draw(screen)`` every ``interval_s`` until ``q`` (one frame when not a terminal).

    ``keys``: other keys and what they do (``p`` toggles ``top``'s process rows); the
    frame is drawn again at once after one.
    """
    if not console.is_terminal:
        sys.stdout.write(plain(draw(Screen())))
        return

    def frame() -> Text:
        size = console.size
        return to_rich(draw(Screen(size.width, size.height)))

    quit_event = threading.Event()
    pressed = threading.Event()
    actions = dict(keys or {})

    def on_key(key: str) -> None:
        action = actions.get(key)
        if action is not None:
            action()
        pressed.set()

    try:
        with (
            _keys_quit(quit_event, on_key),
            Live(frame(), console=console, screen=True, auto_refresh=False) as live,
        ):
            while not quit_event.is_set():
                pressed.wait(interval_s)
                pressed.clear()
                if quit_event.is_set():
                    break
                live.update(frame(), refresh=True)
    finally:
        # Ctrl-C can land inside Live's __enter__, after it switched to the alternate screen
        # and hid the cursor but before the with block owned it: then no __exit__ undoes that,
        # and the shell would come back on a blank screen with no cursor.
        if console.is_alt_screen:
            console.set_alt_screen(False)
            console.show_cursor(True)


@contextlib.contextmanager
def _keys_quit(
    quit_event: threading.Event, on_key: Callable[[str], None] = lambda _key: None
) -> Iterator[None]:
    """Watch stdin for a quit key (and ``on_key`` for others) while the block runs."""
    fd = sys.stdin.fileno() if sys.stdin is not None and sys.stdin.isatty() else None
    if fd is None:
        yield
        return
    saved = termios.tcgetattr(fd)
    reader = ServiceThread(
        "live-keys", lambda wake: _read_keys(fd, quit_event, wake.stop_event, on_key)
    )
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


def _read_keys(
    fd: int,
    quit_event: threading.Event,
    stop: threading.Event,
    on_key: Callable[[str], None] = lambda _key: None,
) -> None:
    """Set ``quit_event`` on a quit key or end of input (``on_key`` for any other key)."""
    while not stop.is_set():
        ready, _, _ = select.select([fd], [], [], KEY_POLL_S)
        if not ready:
            continue
        key = os.read(fd, 1).decode(errors="replace")
        if key == "" or key in QUIT_KEYS:
            quit_event.set()
            on_key(key)  # wakes the drawing loop: it quits at once
            return
        on_key(key)
