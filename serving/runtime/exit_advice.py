"""What the supervisor tells the recovery policy when an engine run ends, and its answer.

The supervisor keeps the mechanics (launch, probe, stop, the restart count and times);
whether an ended run is restarted, held or left stopped is the recovery policy's call
(``recovery.supervision`` answers for it). The supervisor reports each end as an
``ExitReport`` and carries out the ``ExitVerdict`` it gets back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ExitReport:
    """One engine run that ended without a person asking (a crash, or an unhealthy stop).

    ``description`` is what happened in words ("engine exited with code 1: cuda_fault");
    ``failures_in_a_row`` counts the failures before this one since the engine was last
    ready long enough; ``restart_times_s`` are the monotonic times of past automatic
    restarts; ``now_s`` is the supervisor's monotonic clock now.
    """

    description: str
    crash_class: str | None
    exit_code: int | None
    signal: int | None
    failures_in_a_row: int
    restart_times_s: tuple[float, ...]
    now_s: float


@dataclass(frozen=True, slots=True)
class RestartIn:
    """Restart after ``delay_s``; this was failure ``failure_in_a_row`` in a row."""

    delay_s: float
    failure_in_a_row: int
    reason: str


@dataclass(frozen=True, slots=True)
class HoldEngine:
    """The breaker: keep the engine down (``held``) until a person starts it."""

    reason: str


@dataclass(frozen=True, slots=True)
class LeaveStopped:
    """Do not restart (a hardware fault, the reboot latch, a critical check, dry run...)."""

    reason: str


ExitVerdict = RestartIn | HoldEngine | LeaveStopped
ExitAdvisor = Callable[[ExitReport], ExitVerdict]
