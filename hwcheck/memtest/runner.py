"""The memory test's procedure, the same on a card and on the simulated memory.

:func:`run_plan` drives a :class:`MemoryTarget` through every pattern's sweeps (for each
pass), plants the self-test's fault when asked, runs the step (stress) mode, and turns
the target's counters into :class:`~hwcheck.memtest.results.PatternRun` results and a
card's verdict. The card's target (:mod:`hwcheck.memtest.cuda`) launches the PTX kernels;
the simulation's (:mod:`hwcheck.sim.memory`) sweeps an array with fault models. Both
therefore run this exact order of fills, checks, plants and idle gaps.

The step mode: every cycle the card idles for :data:`GAP_S`, then writes and verifies
random data (a new seed each cycle) at full bandwidth over a window of about an eighth of
the memory (whole chunks; the window moves on each cycle, so the first words a burst
touches are all over the memory after a few cycles), then a light walking pattern over
the window's start with a handful of thread blocks. A card that corrupts data right after
each jump from idle to full traffic (a load-transient fault) is found within seconds;
every fixed pattern runs back to back, with one jump at the start, and misses it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from hwcheck.memtest.patterns import (
    MASK32,
    RANDOM,
    SEED_MULTIPLIER,
    STRESS,
    WALKING,
    WORD_BYTES,
    Sweep,
    pass_seed,
    pattern_sweeps,
)
from hwcheck.memtest.results import (
    MAX_CARD_BLOCKS,
    MAX_RUN_BLOCKS,
    BadWord,
    CardMemtest,
    MemtestOutcome,
    MemtestPlan,
    MemtestProgress,
    PatternRun,
)
from hwcheck.memtest.verdict import judge
from hwcheck.thermal_stop import StopAsked, no_stop

MAX_RECORDS = 8  # first bad words kept per pattern pass
PLANT_FLIP = 0x00000101  # the self-test flips two bits of one word
GAP_S = 0.02  # the stress mode's idle gap between bursts
STRESS_WINDOW_PARTS = 8  # the window is about this fraction of the memory
LIGHT_MAX_WORDS = (16 << 20) // WORD_BYTES  # the light pattern's span
GIB = 1 << 30


@dataclass
class Counts:
    """A target's counters since its last ``reset``: what the check kernels found."""

    bad_words: int = 0
    bit_errors: int = 0
    zero_bursts: int = 0
    records: list[tuple[int, int, int]] = field(default_factory=list)  # (word, expected, got)
    blocks: dict[int, int] = field(default_factory=dict)  # block -> bad words


class MemoryTarget(Protocol):
    """Memory the test can sweep: a card's (through its kernels) or a simulated one."""

    @property
    def words(self) -> int:
        """32-bit words under test."""
        ...

    @property
    def block_words(self) -> int:
        """Words per block of the error map."""
        ...

    @property
    def chunk_words(self) -> int:
        """Words per chunk (the unit of a launch; stress windows are whole chunks)."""
        ...

    def sweep(self, sweep: Sweep, first: int, count: int, light: bool = False) -> None:
        """Run ``sweep`` over words ``first .. first+count-1`` (whole chunks); ``light``: few threads."""
        ...

    def plant(self, word: int, value: int) -> None:
        """Write ``value`` into ``word`` behind the pattern's back (the self-test)."""
        ...

    def reset(self) -> None:
        """Zero the counters and the block map."""
        ...

    def collect(self, max_records: int) -> Counts:
        """Wait for the queued sweeps and read the counters back."""
        ...

    def settle(self) -> None:
        """Wait until every queued sweep is done."""
        ...

    def idle(self, seconds: float) -> None:
        """Leave the memory idle (no traffic) for ``seconds``."""
        ...

    def clock(self) -> float:
        """Seconds on the target's monotonic clock (simulated on the simulation)."""
        ...


Report = Callable[[MemtestProgress], None]


@dataclass
class _Card:
    """What the passes found so far, across patterns (the verdict needs every block)."""

    static_blocks: dict[int, int] = field(default_factory=dict)
    stress_blocks: dict[int, int] = field(default_factory=dict)
    runs: list[PatternRun] = field(default_factory=list)


def plant_site(target: MemoryTarget, salt: int, first: int = 0, count: int | None = None) -> int:
    """The word the self-test corrupts: mid-block, in a block chosen by ``salt``."""
    span = target.words - first if count is None else count
    blocks = span // target.block_words
    if blocks == 0:
        return first + span // 2
    block = (salt * 7919 + 3) % blocks
    return first + block * target.block_words + target.block_words // 2 + 5


def _run_result(
    name: str,
    pass_number: int,
    counts: Counts,
    planted_word: int | None,
    block_words: int,
    duration_s: float,
    moved_bytes: int,
    cycles: int = 0,
) -> tuple[PatternRun, dict[int, int]]:
    """The pattern's result and its full block map, the planted word taken out."""
    blocks = dict(counts.blocks)
    bad_words, bit_errors = counts.bad_words, counts.bit_errors
    records = counts.records
    found = 0
    if planted_word is not None:
        block = planted_word // block_words
        if blocks.get(block, 0) > 0:
            found = 1
            bad_words -= 1
            bit_errors = max(bit_errors - PLANT_FLIP.bit_count(), 0)
            blocks[block] -= 1
            if not blocks[block]:
                del blocks[block]
            records = [r for r in records if r[0] != planted_word]
    listed = tuple(sorted(blocks.items())[:MAX_RUN_BLOCKS])
    run = PatternRun(
        pattern=name,
        pass_number=pass_number,
        bit_errors=bit_errors,
        bad_words=bad_words,
        zero_bursts=counts.zero_bursts,
        first_bad=tuple(
            BadWord(word * WORD_BYTES, expected, got) for word, expected, got in sorted(records)
        ),
        blocks=listed,
        blocks_failed=len(blocks),
        duration_s=round(duration_s, 4),
        gib_per_s=round(moved_bytes / GIB / duration_s, 1) if duration_s > 0 else 0.0,
        planted=0 if planted_word is None else 1,
        planted_found=found,
        cycles=cycles,
    )
    return run, blocks


def run_pattern(
    target: MemoryTarget,
    card: int,
    name: str,
    pass_number: int,
    plan: MemtestPlan,
    report: Report,
) -> tuple[PatternRun, dict[int, int]]:
    """One pass of pattern ``name`` over the whole memory."""
    sweeps = pattern_sweeps(name, pass_seed(plan.seed, pass_number - 1))
    target.reset()
    started_s = target.clock()
    planted_word: int | None = None
    moved = 0
    for index, sweep in enumerate(sweeps):
        target.sweep(sweep, 0, target.words)
        moved += sweep.moved_per_word * target.words
        if index == 0 and plan.inject:
            salt = pass_number * 31 + len(name)
            planted_word = plant_site(target, salt)
            target.plant(planted_word, sweep.expected(planted_word) ^ PLANT_FLIP)
        target.settle()
        report(
            MemtestProgress(card, name, pass_number, plan.passes, index + 1, len(sweeps)),
        )
    counts = target.collect(MAX_RECORDS)
    duration_s = target.clock() - started_s
    return _run_result(
        name, pass_number, counts, planted_word, target.block_words, duration_s, moved
    )


def stress_window(words: int, chunk_words: int) -> int:
    """About an eighth of the memory, in whole chunks (at least one, at most all)."""
    chunks = max(words // chunk_words // STRESS_WINDOW_PARTS, 1)
    return min(chunks * chunk_words, words)


def run_stress(
    target: MemoryTarget, card: int, plan: MemtestPlan, report: Report, stop: StopAsked = no_stop
) -> tuple[PatternRun, dict[int, int], str | None]:
    """The step mode for ``plan.stress_s`` seconds of the target's clock (one cycle at least).

    ``stop`` is asked before each cycle: the reason it gives ends the mode early (returned).
    """
    target.reset()
    window = stress_window(target.words, target.chunk_words)
    started_s = target.clock()
    busy_s = 0.0
    moved = cycles = first = 0
    planted_word: int | None = None
    stopped: str | None = None
    while cycles == 0 or target.clock() - started_s < plan.stress_s:
        stopped = stop()
        if stopped is not None:
            break
        target.idle(GAP_S)
        count = min(window, target.words - first)
        seed = (plan.seed ^ (cycles * SEED_MULTIPLIER)) & MASK32
        burst_s = target.clock()
        target.sweep(Sweep(True, RANDOM, seed), first, count)
        if plan.inject and cycles == 0:
            planted_word = plant_site(target, 1, first, count)
            target.plant(
                planted_word, Sweep(True, RANDOM, seed).expected(planted_word) ^ PLANT_FLIP
            )
        target.sweep(Sweep(False, RANDOM, seed), first, count)
        light = min(count, LIGHT_MAX_WORDS)
        target.sweep(Sweep(True, WALKING, cycles & 31), first, light, light=True)
        target.sweep(Sweep(False, WALKING, cycles & 31), first, light, light=True)
        target.settle()
        busy_s += target.clock() - burst_s
        moved += 2 * WORD_BYTES * (count + light)
        cycles += 1
        first = (first + count) % target.words
        report(MemtestProgress(card, STRESS, 1, 1, cycles, 0))
    counts = target.collect(MAX_RECORDS)
    run, blocks = _run_result(
        STRESS, 1, counts, planted_word, target.block_words, busy_s, moved, cycles=cycles
    )
    return run, blocks, stopped


def run_plan(
    target: MemoryTarget, card: int, plan: MemtestPlan, report: Report, stop: StopAsked = no_stop
) -> tuple[list[PatternRun], dict[int, int], dict[int, int], str | None]:
    """Every pattern for every pass, then the stress mode: the runs, the block maps, a stop.

    The maps (block -> bad words) are the fixed patterns' and the stress mode's, whole.
    ``stop`` (the thermal guard) is asked before each pattern and each stress cycle; the
    reason it gave, when it ended the run early, comes last.
    """
    state = _Card()
    for pass_number in range(1, plan.passes + 1):
        for name in plan.patterns:
            stopped = stop()
            if stopped is not None:
                return state.runs, state.static_blocks, state.stress_blocks, stopped
            run, blocks = run_pattern(target, card, name, pass_number, plan, report)
            state.runs.append(run)
            _merge(state.static_blocks, blocks)
    stopped = None
    if plan.stress_s > 0:
        run, blocks, stopped = run_stress(target, card, plan, report, stop)
        state.runs.append(run)
        _merge(state.stress_blocks, blocks)
    return state.runs, state.static_blocks, state.stress_blocks, stopped


def _merge(into: dict[int, int], blocks: dict[int, int]) -> None:
    for block, count in blocks.items():
        into[block] = into.get(block, 0) + count


def card_result(
    card: int,
    target: MemoryTarget,
    plan: MemtestPlan,
    report: Report,
    block_kib: int,
    clock: Callable[[], float],
    stop: StopAsked = no_stop,
) -> CardMemtest:
    """Run ``plan`` on ``target`` and sum it up as the card's result and verdict.

    A run the thermal guard (``stop``) ended is ``stopped_hot`` with the reading named,
    never ``passed``; errors found before the stop still make it ``failed``.
    """
    started_s = clock()
    runs, static_blocks, stress_blocks, stopped = run_plan(target, card, plan, report, stop)
    duration_s = clock() - started_s
    merged = dict(static_blocks)
    _merge(merged, stress_blocks)
    bad = [run for run in runs if run.bad_words]
    first = next((run for run in bad if run.first_bad), None)
    planted = sum(run.planted for run in runs)
    planted_found = sum(run.planted_found for run in runs)
    blocks_tested = max(target.words // target.block_words, 1)
    moved_s = sum(run.duration_s for run in runs)
    moved_gib = sum(run.gib_per_s * run.duration_s for run in runs)
    zero_bursts = sum(run.zero_bursts for run in runs)
    verdict = judge(set(static_blocks), set(stress_blocks), zero_bursts, blocks_tested, block_kib)
    outcome = MemtestOutcome.FAILED if bad else MemtestOutcome.PASSED
    error = None
    if stopped is not None:
        error = f"stopped hot ({stopped}) before the test finished: cool the card, rerun"
        if not bad:
            outcome = MemtestOutcome.STOPPED_HOT
            verdict = error
    if planted_found < planted:
        outcome = MemtestOutcome.ERROR
        error = (
            f"the self-test planted {planted} fault(s) and found {planted_found}: "
            "the test does not work on this card"
        )
    return CardMemtest(
        card=card,
        outcome=outcome,
        tested_mib=target.words * WORD_BYTES >> 20,
        bit_errors=sum(run.bit_errors for run in runs),
        first_error_offset=None if first is None else first.first_bad[0].offset,
        pattern=None if first is None else first.pattern,
        error=error,
        duration_s=round(duration_s, 3),
        bad_words=sum(run.bad_words for run in runs),
        zero_bursts=zero_bursts,
        blocks=tuple(sorted(merged.items())[:MAX_CARD_BLOCKS]),
        blocks_failed=len(merged),
        blocks_tested=blocks_tested,
        block_kib=block_kib,
        gib_per_s=round(moved_gib / moved_s, 1) if moved_s > 0 else 0.0,
        verdict=verdict,
        runs=tuple(runs),
        seed=plan.seed,
        planted=planted,
        planted_found=planted_found,
    )
