"""The memory test's results: plain data the daemon stores and the ``memtest`` check judges.

Apart from :mod:`hwcheck.memtest` (which runs a process) so that the daemon, the API and
the simulation can use them without importing anything that does I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol


class MemtestOutcome(enum.StrEnum):
    """One card's result.

    ``failed`` (the patterns read back wrong) and ``timed_out`` (the card hung the driver)
    are failures; ``error`` (a CUDA call failed before any pattern ran) and
    ``unavailable`` (no driver library) say the test could not run; ``not_run``: skipped
    after an earlier card hung the driver.
    """

    PASSED = "passed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    ERROR = "error"
    UNAVAILABLE = "unavailable"
    NOT_RUN = "not_run"

    @property
    def failure(self) -> bool:
        """The card's memory (or the card) failed the test: critical until a passing run."""
        return self in (MemtestOutcome.FAILED, MemtestOutcome.TIMED_OUT)


@dataclass(frozen=True, slots=True)
class CardMemtest:
    """One card's memory test.

    ``bit_errors`` counts flipped bits over every pattern; ``first_error_offset`` is the
    byte offset (from the start of the tested memory) of the first bad word and
    ``pattern`` the pattern that found it; ``error`` is the CUDA error name or why the
    test could not run.
    """

    card: int
    outcome: MemtestOutcome
    tested_mib: int = 0
    bit_errors: int = 0
    first_error_offset: int | None = None
    pattern: str | None = None
    error: str | None = None
    duration_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``outcome`` as its word)."""
        values = asdict(self)
        values["outcome"] = self.outcome.value
        return values

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> CardMemtest:
        """The result from ``as_dict``'s output (stored events, the child's JSON line)."""
        offset = value.get("first_error_offset")
        return cls(
            card=int(value["card"]),
            outcome=MemtestOutcome(str(value["outcome"])),
            tested_mib=int(value.get("tested_mib") or 0),
            bit_errors=int(value.get("bit_errors") or 0),
            first_error_offset=None if offset is None else int(offset),
            pattern=None if value.get("pattern") is None else str(value["pattern"]),
            error=None if value.get("error") is None else str(value["error"]),
            duration_s=float(value.get("duration_s") or 0.0),
        )

    def summary(self) -> str:
        """``card 3: FAILED, 37 bit errors in 4,096 MiB (first at 0x1f400000, pattern 0xaaaaaaaa)``."""
        head = f"card {self.card}: {self.outcome.value.upper().replace('_', ' ')}"
        if self.outcome is MemtestOutcome.FAILED:
            where = (
                ""
                if self.first_error_offset is None
                else f", first at {self.first_error_offset:#x}"
            )
            pattern = "" if self.pattern is None else f", pattern {self.pattern}"
            return (
                f"{head}, {self.bit_errors:,} bit errors in {self.tested_mib:,} MiB{where}{pattern}"
            )
        if self.outcome is MemtestOutcome.PASSED:
            return f"{head}, {self.tested_mib:,} MiB clean"
        return f"{head}" + (f" ({self.error})" if self.error else "")


class Memtester(Protocol):
    """Anything that can test one card's memory: the real child process or a scenario."""

    def test(self, card: int, mib: int) -> CardMemtest:
        """Pattern-test ``mib`` MiB of card ``card`` (NVML index); never raises for the card."""
        ...


def run_on_cards(memtester: Memtester, cards: Sequence[int], mib: int) -> list[CardMemtest]:
    """Test each card in turn; after a card that hung the driver, the rest are not run.

    A child stuck in the driver holds that card; the next test would most likely hang
    behind it, and a reboot is due anyway.
    """
    results: list[CardMemtest] = []
    for card in cards:
        if results and results[-1].outcome is MemtestOutcome.TIMED_OUT:
            results.append(
                CardMemtest(card, MemtestOutcome.NOT_RUN, error="an earlier card hung the driver")
            )
            continue
        results.append(memtester.test(card, mib))
    return results
