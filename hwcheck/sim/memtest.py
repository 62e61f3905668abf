"""The memory test of a simulated rig: ``[host.cards.N] memtest_errors`` answers.

A card with errors fails with that many flipped bits, the first in the first pattern at
a fixed offset inside the tested span; every other card passes. No process starts and
no memory is touched: the simulation never touches the host.
"""

from __future__ import annotations

from hwcheck.memtest_results import CardMemtest, MemtestOutcome
from hwcheck.sim.scenario import Scenario

FIRST_PATTERN = "0xaaaaaaaa"


class SimulatedMemtester:
    """``Memtester`` answering from the scenario."""

    def __init__(self, scenario: Scenario) -> None:
        self._scenario = scenario
        self.calls: list[tuple[int, int]] = []

    def test(self, card: int, mib: int) -> CardMemtest:
        """One card's result, at once."""
        self.calls.append((card, mib))
        errors = self._scenario.host.facts.card(card).memtest_errors
        if not errors:
            return CardMemtest(card, MemtestOutcome.PASSED, tested_mib=mib, duration_s=0.1)
        return CardMemtest(
            card,
            MemtestOutcome.FAILED,
            tested_mib=mib,
            bit_errors=errors,
            first_error_offset=(mib * 1024 * 1024 // 3) & ~0xFFF,  # a page inside the span
            pattern=FIRST_PATTERN,
            duration_s=0.1,
        )
