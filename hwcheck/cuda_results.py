"""The CUDA probe's results: plain data that the recovery policy reads.

Apart from :mod:`hwcheck.cuda_probe` (which runs a process) so that ``recovery`` can import
the results without importing anything that does I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


class ProbeOutcome(enum.StrEnum):
    """One card's probe result; ``unavailable`` (no driver library) is not a failure."""

    OK = "ok"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True, slots=True)
class CardProbe:
    """One card's result; ``error`` is the CUDA error name (or why it is unavailable)."""

    card: int
    outcome: ProbeOutcome
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ProbeRound:
    """One run of the probe over some cards, and when it ended (wall clock, for people)."""

    at: datetime
    results: tuple[CardProbe, ...]

    @property
    def failed(self) -> tuple[CardProbe, ...]:
        """The cards that failed or timed out (``unavailable`` is not a failure)."""
        return tuple(r for r in self.results if r.outcome in FAILED_OUTCOMES)


FAILED_OUTCOMES = frozenset({ProbeOutcome.FAILED, ProbeOutcome.TIMED_OUT})


class CudaProber(Protocol):
    """Anything that can probe cards: the real subprocess or a scenario's answers."""

    def probe(self, cards: Sequence[int]) -> tuple[CardProbe, ...]:
        """Probe ``cards`` (NVML indices); one result per card, in order."""
        ...
