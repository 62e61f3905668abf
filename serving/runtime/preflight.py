"""What may block a launch: the daemon's preflight (the port), plus the previous engine's survivors.

Mechanics only: whether the engine should start at all (the latch, the checks, the CUDA
probe, lint errors) is decided by recovery's start gate before a start reaches here.

Processes left behind by the last engine (still running, not zombies) may hold GPU memory;
a new engine on top of them would fail or crowd the cards, so they block a start. They are
never killed for the operator.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence

import psutil

from serving.runtime.states import Refusal

_LOG = logging.getLogger(__name__)

Preflight = Callable[[], list[Refusal]]


class StartGate:
    """Runs the preflight and checks for survivors of the last engine."""

    def __init__(self, preflight: Preflight) -> None:
        self._preflight = preflight
        self._survivors: tuple[int, ...] = ()

    def note_survivors(self, pids: Sequence[int]) -> None:
        """The processes of the engine's group that outlived it."""
        self._survivors = tuple(pids)

    def check(self) -> tuple[tuple[Refusal, ...], tuple[Refusal, ...]]:
        """``(blocking, warnings)`` for a start now."""
        try:
            found = tuple(self._preflight())
        except Exception as exc:
            _LOG.exception("the serving preflight failed")
            found = (Refusal("preflight_error", f"preflight check failed: {exc}"),)
        leftovers = self._live_survivors()
        if leftovers:
            found += (
                Refusal(
                    "engine_survivors",
                    f"processes of the previous engine still run (pids "
                    f"{', '.join(map(str, leftovers))}) and may hold GPU memory: a new engine "
                    "would start on top of them; reboot (they are never killed for you)",
                ),
            )
        blocking = tuple(r for r in found if r.blocking)
        return blocking, tuple(r for r in found if not r.blocking)

    def _live_survivors(self) -> tuple[int, ...]:
        alive = []
        for pid in self._survivors:
            with contextlib.suppress(psutil.Error):
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
        self._survivors = tuple(alive)
        return self._survivors
