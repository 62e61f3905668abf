"""What the start gate would refuse now, for the status: buttons that cannot succeed are off.

The dashboard enables Start and Restart only when a start can go ahead; the gate (the
latch, a critical gating check on the profile's cards, its lint errors, a diagnostic
holding the cards) says so. Asking it lints the recipe, so one answer is kept for a
second: status renders come several times a second under load, the gate's facts move
at the poll's pace. Nothing is decided here: ``request_start`` still decides each start.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from daemon.engine.actions import refusal_document
from daemon.engine.recovery_requests import RecoveryRequests

KEEP_S = 1.0


class GateNow:
    """The gate's refusals for a start of the profile in force, kept ``KEEP_S``."""

    def __init__(
        self, starts: RecoveryRequests, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._starts = starts
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: tuple[float, list[dict[str, Any]]] | None = None

    def blocked(self) -> list[dict[str, Any]]:
        """Each reason a start would be refused now (``RefusalDocument``s); empty: it may."""
        now_s = self._clock()
        with self._lock:
            if self._kept is not None and now_s - self._kept[0] < KEEP_S:
                return self._kept[1]
        found = [refusal_document(reason) for reason in self._starts.start_refusals()]
        with self._lock:
            self._kept = (now_s, found)
        return found
