"""What a retest must cover to clear a memory-test failure, and the command that does.

A failure that only the stress mode found ("return the card") was once cleared by the
plain ``fleetctl diag memtest --card 1`` its fix line prescribed: no ``--minutes``, so no
stress mode, a pass, the alert resolved and the card went back into service. A failure
is cleared only by a passing run that covers the fixed patterns that found errors and,
when the stress mode found them, the stress mode for at least as long; the fix line
gives that exact command.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from hwcheck.memtest.patterns import PATTERNS, STRESS
from hwcheck.memtest.results import CardMemtest, MemtestOutcome


@dataclass(frozen=True, slots=True)
class Retest:
    """The fixed ``patterns`` that found errors, and the stress ``minutes`` (0: not stress)."""

    patterns: tuple[str, ...] = ()
    minutes: float = 0.0

    def covered_by(self, patterns: Iterable[str], minutes: float) -> bool:
        """True when a run of ``patterns`` then ``minutes`` of stress tests what failed."""
        return set(self.patterns) <= set(patterns) and minutes >= self.minutes

    def what(self) -> str:
        """``the stress mode (2 min)`` / ``solid, random and the stress mode (2 min)``."""
        parts = list(self.patterns)
        if self.minutes:
            parts.append(f"the stress mode ({self.minutes:g} min)")
        if len(parts) > 1:
            return f"{', '.join(parts[:-1])} and {parts[-1]}"
        return parts[0] if parts else "the memory test"

    def command(self, card: int) -> str:
        """The exact run that clears it: ``fleetctl diag memtest --card 1 --minutes 2``."""
        words = ["fleetctl diag memtest", f"--card {card}"]
        if self.patterns and set(self.patterns) != set(PATTERNS):
            words.append(f"--patterns {','.join(self.patterns)}")
        if self.minutes:
            words.append(f"--minutes {self.minutes:g}")
        return " ".join(words)


def _found_errors(bad_words: int, bit_errors: int, blocks_failed: int) -> bool:
    return bool(bad_words or bit_errors or blocks_failed)


def retest_of(result: CardMemtest, minutes: float | None) -> Retest:
    """What ``result`` (a failure) needs a retest to cover.

    ``minutes``: its run's stress time (None: not stored, read from its stress run). A run
    that hung the driver needs the same patterns it ran (what hung is not known).
    """
    if result.outcome is MemtestOutcome.TIMED_OUT:
        ran = {run.pattern for run in result.runs}
    else:
        ran = {
            run.pattern
            for run in result.runs
            if _found_errors(run.bad_words, run.bit_errors, run.blocks_failed)
        }
        if not ran and result.pattern:
            ran = {result.pattern}
    stress_minutes = 0.0
    if STRESS in ran:
        if minutes:
            stress_minutes = minutes
        else:
            stress_s = max(
                (run.duration_s for run in result.runs if run.pattern == STRESS), default=0
            )
            stress_minutes = float(max(1, math.ceil(stress_s / 60)))
    return Retest(tuple(p for p in PATTERNS if p in ran), stress_minutes)
