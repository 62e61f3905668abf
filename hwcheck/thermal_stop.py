"""The thermal stop every on-card test obeys: asked between steps, a reason to stop or None.

The parent (fleetd) reads the card's temperatures through NVML; a child process that
drives the card through libcuda cannot, so the parent writes the reason into a stop file
the child looks for between steps (:class:`StopWatch`, :func:`stop_file_reason`). Used by
the memory test's stress mode and by ``diag pcie``/``diag compute``
(``hwcheck.carddiag``): a run it ends is ``stopped_hot``, never ``passed``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from hwcheck.threads import ServiceThread, Wake

StopAsked = Callable[[], str | None]  # why to stop now (too hot), or None
WATCH_EVERY_S = 1.0  # the thermal watch's pace on a rig


def no_stop() -> str | None:
    """A run nothing stops (no thermal guard: a bench, a self-test)."""
    return None


def stop_file_reason(path: str | None) -> str | None:
    """The reason written into ``path`` when it exists (the parent says: too hot)."""
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(200).strip() or "too hot"
    except OSError:
        return "too hot"


class StopWatch:
    """Asks ``stop`` every ``every_s`` while a child runs; writes ``path`` when it answers."""

    def __init__(self, stop: StopAsked, path: Path, every_s: float = WATCH_EVERY_S) -> None:
        self._stop = stop
        self._path = path
        self._every_s = every_s
        self.reason: str | None = None
        self._thread = ServiceThread("thermal-stop", self._watch)

    def __enter__(self) -> StopWatch:
        self._thread.start()
        return self

    def _watch(self, wake: Wake) -> None:
        while wake.wait(self._every_s):  # False once the run has ended
            why = self._stop()
            if why is not None:
                self.reason = why
                self._path.write_text(why, encoding="utf-8")
                return

    def __exit__(self, *_exc: object) -> None:
        self._thread.stop(timeout_s=5.0)
