"""Each simulated fault model is found by the pattern made for it, and the light patterns miss the rest.

The memory test's own procedure (``hwcheck.memtest.runner``: the sweeps, plants, idle gaps
and counters a card runs) over the simulated memory (``hwcheck.sim.memory``) with one
fault model at a time; small memories so the suite stays fast. Nothing is mocked: the
runner, the pattern values and the fault models are the real ones.
"""

from __future__ import annotations

import time

import pytest

from hwcheck.memtest.patterns import PATTERNS, STRESS
from hwcheck.memtest.results import CardMemtest, MemtestOutcome, MemtestPlan, MemtestProgress
from hwcheck.memtest.runner import card_result
from hwcheck.sim.memory import Coupling, SimFaults, SimMemory, fault_models

WORDS = 32 * 1024  # 128 KiB
BLOCK_WORDS = 2048  # 8 KiB blocks: sixteen in the map
LIGHT = ("solid", "checkerboard", "walking")


def run(faults: SimFaults, plan: MemtestPlan) -> CardMemtest:
    memory = SimMemory(WORDS, BLOCK_WORDS, BLOCK_WORDS, faults)
    return card_result(0, memory, plan, lambda _p: None, 8, time.monotonic)


def found_by(faults: SimFaults) -> set[str]:
    """The patterns (and ``stress``) that find errors, each run on its own memory."""
    found = set()
    for name in PATTERNS:
        if run(faults, MemtestPlan(patterns=(name,), seed=11)).bad_words:
            found.add(name)
    if run(faults, MemtestPlan(patterns=(), stress_s=60, seed=11)).bad_words:
        found.add(STRESS)
    return found


@pytest.mark.parametrize(
    ("model", "finders"),
    [
        # every pattern writes both values into every bit at some point
        ("stuck-bit", {*PATTERNS, STRESS}),
        # data that differs between the two addresses: the address pattern (random data
        # and the march's order see it too); solid, checkerboard and walking write the
        # same value at both and cannot. The stress mode checks each window right after
        # filling it: this alias spans 4,096 words, one whole window here, and is unseen
        ("address-alias", {"address", "moving-inversions", "random"}),
        # only the march reads the victim after the aggressor's transition
        ("coupling", {"moving-inversions"}),
        # only the stress mode jumps from idle to full traffic again and again
        ("load-transient", {STRESS}),
    ],
)
def test_each_fault_model_is_found_by_its_pattern_and_missed_by_the_others(
    model: str, finders: set[str]
) -> None:
    assert found_by(fault_models([model], WORDS)) == finders
    if model != "stuck-bit":
        assert not finders & set(LIGHT)  # the light patterns alone would pass this card


def test_a_clean_memory_passes_everything() -> None:
    result = run(fault_models([], WORDS), MemtestPlan(stress_s=60, seed=3))

    assert result.outcome is MemtestOutcome.PASSED
    assert (result.bad_words, result.bit_errors, result.blocks, result.verdict) == (0, 0, (), None)
    assert [r.pattern for r in result.runs] == [*PATTERNS, STRESS]
    assert result.runs[-1].cycles == 15  # a minute: each idle gap skips 4 s of the clock


def test_the_march_also_catches_a_victim_below_its_aggressor() -> None:
    faults = SimFaults(couplings=(Coupling(aggressor=9000, bit=3, victim=8000, victim_bit=7),))

    result = run(faults, MemtestPlan(patterns=("moving-inversions",), seed=1))

    assert result.outcome is MemtestOutcome.FAILED
    assert {block for block, _ in result.blocks} == {8000 // BLOCK_WORDS}
    assert result.first_error_offset == 8000 * 4


def test_a_load_transient_reads_back_whole_zero_bursts_in_many_blocks() -> None:
    result = run(fault_models(["load-transient"], WORDS), MemtestPlan(patterns=(), stress_s=60))

    (stress,) = result.runs
    assert stress.zero_bursts == stress.cycles - 2  # from the third jump on, one burst each
    assert stress.bad_words == 32 * stress.zero_bursts  # whole 128-byte bursts
    assert all(bad.got == 0 for bad in stress.first_bad)
    assert result.blocks_failed == 8  # the first burst of each of the eight windows
    assert result.verdict is not None
    assert result.verdict.startswith("errors everywhere under load: ")
    assert "(found only under the stress mode's load)" in result.verdict
    assert "bursts read back as zeros" in result.verdict


def test_cell_faults_in_a_few_places_are_fixed_blocks() -> None:
    models = ["stuck-bit", "address-alias", "coupling"]

    result = run(fault_models(models, WORDS), MemtestPlan(seed=5))

    assert result.outcome is MemtestOutcome.FAILED
    assert result.blocks_failed == 4  # the stuck bit, the coupling victim, both alias words
    assert result.verdict is not None
    assert result.verdict.startswith("a few fixed blocks: 4 of 16 8 KiB blocks fail (#")
    by_pattern = {r.pattern: r for r in result.runs}
    assert by_pattern["moving-inversions"].bad_words > 0
    assert by_pattern["solid"].blocks == ((5, 1),)  # the stuck bit: word 5/16 of the memory


def test_planted_faults_are_found_and_left_out_of_the_counts() -> None:
    result = run(fault_models([], WORDS), MemtestPlan(passes=2, stress_s=20, inject=True))

    assert result.outcome is MemtestOutcome.PASSED
    assert (result.planted, result.planted_found) == (2 * len(PATTERNS) + 1, 2 * len(PATTERNS) + 1)
    assert result.bad_words == 0
    assert all(run.planted == run.planted_found == 1 for run in result.runs)


def test_progress_names_each_sweep_of_each_pass() -> None:
    seen: list[MemtestProgress] = []
    memory = SimMemory(WORDS, BLOCK_WORDS, BLOCK_WORDS, fault_models([], WORDS))

    card_result(
        2, memory, MemtestPlan(patterns=("solid",), passes=2), seen.append, 8, time.monotonic
    )

    assert [(p.pass_number, p.step, p.steps) for p in seen] == [
        (1, 1, 4), (1, 2, 4), (1, 3, 4), (1, 4, 4), (2, 1, 4), (2, 2, 4), (2, 3, 4), (2, 4, 4),
    ]  # fmt: skip
    assert seen[-1].line() == "card 2: solid pass 2/2, sweep 4/4"
