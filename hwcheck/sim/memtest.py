"""The memory test of a simulated rig: the real procedure over a simulated memory per card.

Each card's memory is a :class:`~hwcheck.sim.memory.SimMemory` of :data:`SIM_MEMORY_MIB`
MiB (blocks of :data:`SIM_BLOCK_KIB` KiB in its map, so the map has sixteen), with the
fault models its scenario names (``[host.cards.N] memtest_faults``, and
``memtest_errors``: that many stuck bits). :func:`hwcheck.memtest.runner.card_result` runs
on it exactly as the child runs it on a card: the same patterns, passes, planted faults,
stress cycles and verdict. The size asked (``--gib``) is capped at the simulated size,
which the result reports. So that any request answers in a few seconds of Python, the
simulation runs at most :data:`SIM_MAX_PASSES` passes (the result lists the passes run),
and its clock skips ahead at each idle gap so that any ``--minutes`` takes about
:data:`SIM_STRESS_CYCLES` cycles (a minute: fifteen, each gap 4 s). No process starts
and nothing of the host is touched.
"""

from __future__ import annotations

import dataclasses
import time

from hwcheck.memtest.patterns import WORD_BYTES
from hwcheck.memtest.results import CardMemtest, MemtestPlan, ProgressSink
from hwcheck.memtest.runner import card_result
from hwcheck.sim.heat import SimHeat
from hwcheck.sim.memory import GAP_SKIP_S, SimMemory, ValuesCache, fault_models
from hwcheck.sim.scenario import Scenario
from hwcheck.thermal_stop import StopAsked, no_stop

SIM_MEMORY_MIB = 1
SIM_BLOCK_KIB = 64
SIM_MAX_PASSES = 2
SIM_STRESS_CYCLES = 15
HEAT_PER_STEP_C = 1.5  # heats-under-load: a pattern or a stress cycle


class SimulatedMemtester:
    """``Memtester`` over each card's simulated memory and the scenario's fault models."""

    def __init__(self, scenario: Scenario, heat: SimHeat | None = None) -> None:
        self._scenario = scenario
        self._heat = heat
        self._values = ValuesCache()  # the cards of a run share their random data
        self.calls: list[tuple[int, MemtestPlan]] = []

    def test(
        self, card: int, plan: MemtestPlan, progress: ProgressSink, stop: StopAsked = no_stop
    ) -> CardMemtest:
        """One card's result (the run takes a fraction of a second of Python).

        A card that heats under load warms at each step (``stop`` is asked then: fleetd's
        thermal guard reads the warmer card), and cools back when the run ends.
        """
        self.calls.append((card, plan))
        facts = self._scenario.host.facts.card(card)
        words = SIM_MEMORY_MIB * (1 << 20) // WORD_BYTES
        block_words = SIM_BLOCK_KIB * 1024 // WORD_BYTES
        faults = fault_models(facts.memtest_faults, words, facts.memtest_errors)
        skip_s = max(GAP_SKIP_S, plan.stress_s / SIM_STRESS_CYCLES)
        memory = SimMemory(words, block_words, block_words, faults, self._values, skip_s)
        simulated = dataclasses.replace(plan, passes=min(plan.passes, SIM_MAX_PASSES))
        heat = self._heat

        def warm_then_ask() -> str | None:
            if heat is not None:
                heat.warm(card, HEAT_PER_STEP_C)
            return stop()

        try:
            return card_result(
                card, memory, simulated, progress, SIM_BLOCK_KIB, time.monotonic, warm_then_ask
            )
        finally:
            if heat is not None:
                heat.cool(card)
