"""What the supervisor tells whoever decides about the engine: a run ended, a backoff is over.

The supervisor keeps the mechanics (launch, probe, stop, the running restart total); it
never decides whether an ended run is restarted, held or left stopped, nor whether a
backoff's end starts the engine: it reports both (recovery's controller listens in
fleetd) and obeys the command that comes back (``restart_after``, ``hold``,
``stay_stopped``, a ``start`` of kind ``restart``). Until then the engine shows
``stopped`` (after an exit) or ``backoff`` with nothing left to wait (a backoff's end).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from serving.runtime.classify import CrashClass


@dataclass(frozen=True, slots=True)
class RunEnded:
    """One engine run that ended without a person asking (a crash, an unhealthy stop).

    ``description`` is what happened in words ("engine exited with code 1 while serving:
    cuda_fault"); ``ready_for_s`` how long the run had been ready (``None``: never).
    """

    description: str
    crash_class: CrashClass | None = None
    exit_code: int | None = None
    signal: int | None = None
    ready_for_s: float | None = None


class EngineReports(Protocol):
    """The listener of the supervisor's reports (called on its loop thread: must not block)."""

    def engine_exited(self, ended: RunEnded) -> None:
        """A run ended on its own; the engine waits stopped for what follows."""
        ...

    def backoff_due(self) -> None:
        """The backoff's wait is over; the engine waits for a start (or a stay-stopped)."""
        ...


class NoReports:
    """Nobody listens: an ended run stays stopped, a backoff never ends in a start."""

    def engine_exited(self, ended: RunEnded) -> None:
        """Nothing to tell."""

    def backoff_due(self) -> None:
        """Nothing to tell."""
