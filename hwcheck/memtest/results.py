"""The memory test's plan and results: plain data the daemon stores and the ``memtest`` check judges.

Apart from :mod:`hwcheck.memtest.children` (which runs processes) so that the daemon, the API and
the simulation can use them without importing anything that does I/O. Stored results of
older runs (before the per-pattern results) read back with the new fields empty.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from hwcheck.memtest.patterns import PATTERNS
from hwcheck.thermal_stop import StopAsked, no_stop

BLOCK_KIB = 2048  # the block map's unit on a card: 2 MiB
MAX_RUN_BLOCKS = 64  # blocks listed per pattern run (blocks_failed counts them all)
MAX_CARD_BLOCKS = 512  # blocks listed per card


class MemtestOutcome(enum.StrEnum):
    """One card's result.

    ``failed`` (the patterns read back wrong) and ``timed_out`` (the card hung the driver)
    are failures; ``stopped_hot`` (the thermal stop ended it: ``[diag]``) is neither a
    pass nor a verdict on the HBM, and keeps the card's last verdict; ``error`` (a CUDA call failed, or the planted self-test fault was not
    found) and ``unavailable`` (no driver library) say the test could not run or cannot
    be trusted; ``not_run``: kept for runs stored before the cards ran in parallel.
    """

    PASSED = "passed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    ERROR = "error"
    UNAVAILABLE = "unavailable"
    NOT_RUN = "not_run"
    STOPPED_HOT = "stopped_hot"

    @property
    def failure(self) -> bool:
        """The card's memory (or the card) failed the test: critical until a passing run."""
        return self in (MemtestOutcome.FAILED, MemtestOutcome.TIMED_OUT)


@dataclass(frozen=True, slots=True)
class MemtestPlan:
    """What to run on each card.

    ``mib``: MiB per card (None: all free memory less a small reserve); ``stress_s``: the
    step (stress) mode's duration (0: none); ``inject``: plant one known fault per
    pattern pass, between its fill and its check, and require it found (the planted
    words are then left out of the counts); ``seed``: the random data's (32-bit).
    """

    mib: int | None = None
    patterns: tuple[str, ...] = PATTERNS
    passes: int = 1
    stress_s: float = 0.0
    inject: bool = False
    seed: int = 0
    stop_file: str | None = None  # the child's thermal stop (the parent writes it)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the child's argument)."""
        values = asdict(self)
        values["patterns"] = list(self.patterns)
        return values

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> MemtestPlan:
        """From ``as_dict``'s output."""
        mib = value.get("mib")
        return cls(
            mib=None if mib is None else int(mib),
            patterns=tuple(str(name) for name in value.get("patterns") or ()),
            passes=int(value.get("passes") or 1),
            stress_s=float(value.get("stress_s") or 0.0),
            inject=bool(value.get("inject")),
            seed=int(value.get("seed") or 0),
            stop_file=value.get("stop_file") or None,
        )


@dataclass(frozen=True, slots=True)
class BadWord:
    """One bad word: its byte offset in the tested memory, the value expected and read."""

    offset: int
    expected: int
    got: int


@dataclass(frozen=True, slots=True)
class PatternRun:
    """One pattern's pass on one card (``stress``: the step mode, with its cycles).

    ``blocks``: ``(block, bad words)`` for the first :data:`MAX_RUN_BLOCKS` failed blocks
    (``blocks_failed`` counts all); ``gib_per_s``: bytes written and read on the card per
    second; ``planted``/``planted_found``: the self-test's faults (``--inject``), already
    left out of the counts.
    """

    pattern: str
    pass_number: int = 1
    bit_errors: int = 0
    bad_words: int = 0
    zero_bursts: int = 0
    first_bad: tuple[BadWord, ...] = ()
    blocks: tuple[tuple[int, int], ...] = ()
    blocks_failed: int = 0
    duration_s: float = 0.0
    gib_per_s: float = 0.0
    planted: int = 0
    planted_found: int = 0
    cycles: int = 0

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> PatternRun:
        """From ``asdict`` form (stored events, the child's JSON line)."""
        return cls(
            pattern=str(value["pattern"]),
            pass_number=int(value.get("pass_number") or 1),
            bit_errors=int(value.get("bit_errors") or 0),
            bad_words=int(value.get("bad_words") or 0),
            zero_bursts=int(value.get("zero_bursts") or 0),
            first_bad=tuple(_bad_word(item) for item in value.get("first_bad") or ()),
            blocks=_blocks(value.get("blocks")),
            blocks_failed=int(value.get("blocks_failed") or 0),
            duration_s=float(value.get("duration_s") or 0.0),
            gib_per_s=float(value.get("gib_per_s") or 0.0),
            planted=int(value.get("planted") or 0),
            planted_found=int(value.get("planted_found") or 0),
            cycles=int(value.get("cycles") or 0),
        )


def _bad_word(value: Any) -> BadWord:
    if isinstance(value, Mapping):
        return BadWord(int(value["offset"]), int(value["expected"]), int(value["got"]))
    offset, expected, got = value
    return BadWord(int(offset), int(expected), int(got))


def _blocks(value: Any) -> tuple[tuple[int, int], ...]:
    return tuple((int(block), int(count)) for block, count in value or ())


@dataclass(frozen=True, slots=True)
class CardMemtest:
    """One card's memory test.

    ``bit_errors``/``bad_words``/``zero_bursts`` add up every pattern's; ``first_error_offset``
    is the byte offset of the first bad word found and ``pattern`` the pattern that found
    it; ``blocks`` the failed blocks of ``block_kib`` KiB over all patterns (the first
    :data:`MAX_CARD_BLOCKS`; ``blocks_failed`` counts all, of ``blocks_tested``);
    ``verdict`` one line for the owner; ``runs`` each pattern's pass; ``error`` the CUDA
    error name or why the test could not run.
    """

    card: int
    outcome: MemtestOutcome
    tested_mib: int = 0
    bit_errors: int = 0
    first_error_offset: int | None = None
    pattern: str | None = None
    error: str | None = None
    duration_s: float = 0.0
    bad_words: int = 0
    zero_bursts: int = 0
    blocks: tuple[tuple[int, int], ...] = ()
    blocks_failed: int = 0
    blocks_tested: int = 0
    block_kib: int = BLOCK_KIB
    gib_per_s: float = 0.0
    verdict: str | None = None
    runs: tuple[PatternRun, ...] = ()
    seed: int | None = None
    planted: int = 0
    planted_found: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``outcome`` as its word)."""
        values = asdict(self)
        values["outcome"] = self.outcome.value
        return values

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> CardMemtest:
        """The result from ``as_dict``'s output (stored events, the child's JSON line)."""
        offset = value.get("first_error_offset")
        seed = value.get("seed")
        return cls(
            card=int(value["card"]),
            outcome=MemtestOutcome(str(value["outcome"])),
            tested_mib=int(value.get("tested_mib") or 0),
            bit_errors=int(value.get("bit_errors") or 0),
            first_error_offset=None if offset is None else int(offset),
            pattern=None if value.get("pattern") is None else str(value["pattern"]),
            error=None if value.get("error") is None else str(value["error"]),
            duration_s=float(value.get("duration_s") or 0.0),
            bad_words=int(value.get("bad_words") or 0),
            zero_bursts=int(value.get("zero_bursts") or 0),
            blocks=_blocks(value.get("blocks")),
            blocks_failed=int(value.get("blocks_failed") or 0),
            blocks_tested=int(value.get("blocks_tested") or 0),
            block_kib=int(value.get("block_kib") or BLOCK_KIB),
            gib_per_s=float(value.get("gib_per_s") or 0.0),
            verdict=None if value.get("verdict") is None else str(value["verdict"]),
            runs=tuple(PatternRun.from_dict(run) for run in value.get("runs") or ()),
            seed=None if seed is None else int(seed),
            planted=int(value.get("planted") or 0),
            planted_found=int(value.get("planted_found") or 0),
        )

    def summary(self) -> str:
        """``card 3: FAILED, 37 bit errors in 4,096 MiB (first at 0x1f400000, pattern solid): <verdict>``."""
        head = f"card {self.card}: {self.outcome.value.upper().replace('_', ' ')}"
        if self.outcome is MemtestOutcome.FAILED:
            where = (
                ""
                if self.first_error_offset is None
                else f", first at {self.first_error_offset:#x}"
            )
            pattern = "" if self.pattern is None else f", pattern {self.pattern}"
            verdict = "" if self.verdict is None else f": {self.verdict}"
            return (
                f"{head}, {self.bit_errors:,} bit errors in {self.tested_mib:,} MiB"
                f"{where}{pattern}{verdict}"
            )
        if self.outcome is MemtestOutcome.PASSED:
            return f"{head}, {self.tested_mib:,} MiB clean"
        return f"{head}" + (f" ({self.error})" if self.error else "")


@dataclass(frozen=True, slots=True)
class MemtestProgress:
    """Where one card's test is: the pattern, its pass, the sweep (stress: the cycle)."""

    card: int
    pattern: str
    pass_number: int = 1
    passes: int = 1
    step: int = 0
    steps: int = 0
    bad_words: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the child's progress line, the API's ``progress``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, card: int, value: Mapping[str, Any]) -> MemtestProgress:
        """From the child's progress line."""
        return cls(
            card=card,
            pattern=str(value.get("pattern") or ""),
            pass_number=int(value.get("pass_number") or 1),
            passes=int(value.get("passes") or 1),
            step=int(value.get("step") or 0),
            steps=int(value.get("steps") or 0),
            bad_words=int(value.get("bad_words") or 0),
        )

    def line(self) -> str:
        """``card 2: walking pass 1/1, sweep 17/128`` (stress: ``cycle 40``)."""
        if self.pattern == "stress":
            where = f"stress, cycle {self.step}"
        else:
            where = f"{self.pattern} pass {self.pass_number}/{self.passes}"
            if self.steps:
                where += f", sweep {self.step}/{self.steps}"
        errors = f", {self.bad_words:,} bad words" if self.bad_words else ""
        return f"card {self.card}: {where}{errors}"


ProgressSink = Callable[[MemtestProgress], None]


def ignore_progress(_progress: MemtestProgress) -> None:
    """A sink for callers that do not show progress."""


class Memtester(Protocol):
    """Anything that can test one card's memory: the real child process or a scenario."""

    def test(
        self, card: int, plan: MemtestPlan, progress: ProgressSink, stop: StopAsked = no_stop
    ) -> CardMemtest:
        """Run ``plan`` on card ``card`` (NVML index); never raises for the card.

        ``stop`` (the thermal guard) is asked between patterns and stress cycles.
        """
        ...


@dataclass
class _Collected:
    """The cards' results as their threads finish (the order is restored at the end)."""

    results: dict[int, CardMemtest] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def run_on_cards(
    memtester: Memtester,
    cards: Sequence[int],
    plan: MemtestPlan,
    progress: ProgressSink = ignore_progress,
    stop_for: Callable[[int], StopAsked] | None = None,
) -> list[CardMemtest]:
    """Test every card at once, each in its own thread (a child process each, for real).

    A card that hangs the driver times out on its own (its child abandoned, never
    killed) while the others finish: a rig is tested in about the time of one card.
    """
    collected = _Collected()

    def one(card: int) -> None:
        try:
            if stop_for is None:
                result = memtester.test(card, plan, progress)
            else:
                result = memtester.test(card, plan, progress, stop_for(card))
        except Exception as exc:  # a bug must not lose the other cards' results
            result = CardMemtest(card, MemtestOutcome.ERROR, error=f"the test failed: {exc}")
        with collected.lock:
            collected.results[card] = result

    if len(cards) == 1:
        one(cards[0])
    else:
        with ThreadPoolExecutor(max_workers=len(cards), thread_name_prefix="memtest") as pool:
            list(pool.map(one, cards))
    return [collected.results[card] for card in cards]
