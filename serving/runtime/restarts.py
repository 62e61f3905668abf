"""Backoff and breaker bookkeeping: what an engine failure leads to.

``RestartBook`` counts automatic restarts (saved by the supervisor), failures in a row (the backoff
exponent, forgiven after ``backoff_reset_after_s`` of uninterrupted readiness) and the
restarts inside the breaker window. ``after_failure`` answers with a typed decision the
supervisor carries out: back off for so long, or hold for a person.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from serving.settings import RecoverySettings


@dataclass(frozen=True)
class Backoff:
    """Restart after ``delay_s``; this is failure ``streak`` in a row."""

    delay_s: float
    streak: int


@dataclass(frozen=True)
class Hold:
    """The breaker trips: ``restarts_in_window`` restarts happened within the window."""

    restarts_in_window: int


class RestartBook:
    """Restart counts for one supervisor (used by its loop thread only)."""

    def __init__(self, recovery: RecoverySettings) -> None:
        self._recovery = recovery
        self.restarts = 0
        self.failures_in_a_row = 0
        self._recent: deque[float] = deque()

    @property
    def breaker_window_s(self) -> float:
        """The breaker's window, for messages."""
        return self._recovery.breaker_window_s

    def clear_streak(self) -> None:
        """A person acted (start, clear hold): backoff and breaker start over."""
        self.failures_in_a_row = 0
        self._recent.clear()

    def count_restart(self, now: float) -> int:
        """An automatic restart is about to launch; its number."""
        self.restarts += 1
        self._recent.append(now)
        return self.restarts

    def forgive_if_stable(self, now: float, ready_since: float) -> None:
        """Reset the backoff streak once the engine has been ready long enough."""
        if self.failures_in_a_row and now - ready_since >= self._recovery.backoff_reset_after_s:
            self.failures_in_a_row = 0

    def after_failure(self, now: float) -> Backoff | Hold:
        """Count one failure and decide: back off, or hold once the breaker trips."""
        recovery = self._recovery
        self.failures_in_a_row += 1
        while self._recent and now - self._recent[0] > recovery.breaker_window_s:
            self._recent.popleft()
        if len(self._recent) >= recovery.breaker_max_restarts:
            return Hold(len(self._recent))
        delay_s = recovery.backoff_delay_s(self.failures_in_a_row)
        return Backoff(delay_s, self.failures_in_a_row)
