"""The backoff streak and the breaker window: how many failures in a row, and when restarts ran.

Recovery's bookkeeping (the supervisor keeps only the running total shown in the
status): ``failures_in_a_row`` is the backoff's exponent, set by each ``RestartAfter``
and forgiven by the policy once a run was ready for ``backoff_reset_after_s``; the
restart times feed the breaker. A person's start clears both. Memory only: a fleetd
restart starts a new streak.
"""

from __future__ import annotations

import threading
from collections import deque

from recovery.decisions import Decision, RestartAfter


class RestartStreak:
    """Failures in a row and the monotonic times of automatic restarts (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures = 0
        self._times: deque[float] = deque(maxlen=1000)

    @property
    def failures_in_a_row(self) -> int:
        """Failures since the engine was last ready long enough (or a person acted)."""
        with self._lock:
            return self._failures

    def clear(self) -> None:
        """A person acted: backoff and breaker start over."""
        with self._lock:
            self._failures = 0
            self._times.clear()

    def note(self, decision: Decision) -> None:
        """A restart was decided: the streak is now the failure it counted."""
        if isinstance(decision, RestartAfter):
            with self._lock:
                self._failures = decision.failure_in_a_row

    def count_restart(self, now_s: float) -> None:
        """An automatic restart launched."""
        with self._lock:
            self._times.append(now_s)

    def recent(self, now_s: float, window_s: float) -> tuple[float, ...]:
        """The restarts within ``window_s`` before ``now_s``."""
        with self._lock:
            return tuple(t for t in self._times if now_s - t <= window_s)
