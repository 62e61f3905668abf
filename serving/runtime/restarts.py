"""Restart bookkeeping: the running total, the failure streak, recent restart times.

Mechanics only: ``RestartBook`` counts automatic restarts (saved by the supervisor),
failures in a row (the backoff exponent, forgiven after ``backoff_reset_after_s`` of
uninterrupted readiness) and the restarts inside the breaker window. Whether an ended
run is restarted and after how long is the recovery policy's decision: ``report`` builds
what the policy is told, ``note_verdict`` records what it answered.
"""

from __future__ import annotations

from collections import deque

from serving.runtime.exit_advice import ExitReport, ExitVerdict, RestartIn
from serving.settings import RecoverySettings


class RestartBook:
    """Restart counts for one supervisor (used by its loop thread only)."""

    def __init__(self, recovery: RecoverySettings) -> None:
        self._recovery = recovery
        self.restarts = 0
        self.failures_in_a_row = 0
        self._recent: deque[float] = deque()

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

    def report(
        self,
        now: float,
        description: str,
        *,
        crash_class: str | None = None,
        exit_code: int | None = None,
        signal: int | None = None,
    ) -> ExitReport:
        """What the policy is told about one ended run (restarts outside the window dropped)."""
        while self._recent and now - self._recent[0] > self._recovery.breaker_window_s:
            self._recent.popleft()
        return ExitReport(
            description=description,
            crash_class=crash_class,
            exit_code=exit_code,
            signal=signal,
            failures_in_a_row=self.failures_in_a_row,
            restart_times_s=tuple(self._recent),
            now_s=now,
        )

    def note_verdict(self, verdict: ExitVerdict) -> None:
        """A restart was decided: the streak is now the failure it counted."""
        if isinstance(verdict, RestartIn):
            self.failures_in_a_row = verdict.failure_in_a_row
