"""The memory test's patterns: what each writes and checks, the same on the card and in the simulation.

Each pattern is a list of sweeps over the tested memory (a fill, or a check that may
rewrite the complement). The value of a word is a function of its index, never stored,
so the check recomputes it: :func:`word_value` is the Python twin of ``memtest_word`` in
``hwcheck/memtest/memtest.ptx`` (the planted self-test fault, the simulation and the GPU check's
read-back comparison rely on them agreeing). Which fault each pattern is for:

- ``solid``: all zeros, then all ones: a bit stuck at either value.
- ``checkerboard``: 0x55555555 and 0xAAAAAAAA on alternate words, both phases: bits that
  leak into their neighbours (within a word and across adjacent words).
- ``walking``: a single one (then a single zero) walking over the 32 bit lines, shifted
  by the word's index: a data line stuck or bridged to another.
- ``address``: each word holds its own index, then its complement: an address line
  stuck or shorted, where two addresses reach the same cells (an alias) and the later
  write wins for both; solid data cannot see it.
- ``moving-inversions``: a march test, over a background of zeros then of ones: fill;
  ascending read-verify-invert; descending read-verify-invert; a last ascending check.
  A write to one cell that flips another (a coupling fault) is seen only when the order
  of reads and writes is controlled; every fill-then-check pattern overwrites the victim
  after the flip.
- ``random``: seeded pseudo-random words (a counter-based hash of the index, so the seed
  reproduces them), then their complement: data-dependent faults no regular pattern
  hits.

The step (stress) mode for ``--minutes`` is :mod:`hwcheck.memtest.runner`'s: full-bandwidth
random data over a window that moves through the memory, an idle gap, a light walking
pattern, many times a second, every word verified: a card whose HBM corrupts data right
after each jump from idle to full traffic passes every pattern above.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

WORD_BYTES = 4
BURST_WORDS = 32  # one 128-byte HBM burst
MASK32 = 0xFFFFFFFF

SOLID, CHECKER, WALKING, ADDRESS, RANDOM = 0, 1, 2, 3, 4
CHECKER_ARG = 0x55555555
ADDRESS_MULTIPLIER = 0x9E3779B1
SEED_MULTIPLIER = 0x9E3779B9

PATTERNS = ("solid", "checkerboard", "walking", "address", "moving-inversions", "random")
STRESS = "stress"  # the step mode's name in results (``--minutes``), not a selectable pattern


class UnknownPattern(ValueError):
    """A pattern name that is not one of :data:`PATTERNS` (the message names them)."""


@dataclass(frozen=True, slots=True)
class Sweep:
    """One pass over the memory: a fill, or a check (descending, rewriting the complement)."""

    fill: bool
    mode: int
    arg: int
    xor: int = 0
    descending: bool = False
    rewrite: bool = False

    def expected(self, word: int) -> int:
        """The value this sweep writes (a fill) or expects (a check) at ``word``."""
        return word_value(self.mode, self.arg, word) ^ self.xor

    @property
    def moved_per_word(self) -> int:
        """Bytes this sweep moves per word: written, read, or read and written back."""
        return WORD_BYTES * (2 if self.rewrite else 1)


def _lowbias32(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7FEB352D) & MASK32
    x ^= x >> 15
    x = (x * 0x846CA68B) & MASK32
    return x ^ (x >> 16)


def word_value(mode: int, arg: int, word: int) -> int:
    """The 32-bit value of word index ``word`` under ``(mode, arg)`` (before the sweep's xor)."""
    low, high = word & MASK32, (word >> 32) & MASK32
    if mode == SOLID:
        return arg
    if mode == CHECKER:
        return arg ^ (MASK32 if low & 1 else 0)
    if mode == WALKING:
        return 1 << ((low + arg) & 31)
    if mode == ADDRESS:
        return (low + high * ADDRESS_MULTIPLIER) & MASK32
    return _lowbias32(low ^ ((arg + high * SEED_MULTIPLIER) & MASK32))


def sweep_values(sweep: Sweep, first: int, count: int) -> array[int]:
    """The words ``first .. first+count-1`` of ``sweep`` (bulk: the regular modes cost no loop)."""
    if sweep.mode == SOLID:
        return array("I", [sweep.arg ^ sweep.xor]) * count
    if sweep.mode in (CHECKER, WALKING):
        period = 2 if sweep.mode == CHECKER else 32
        cycle = array("I", [sweep.expected(first + k) for k in range(period)])
        values = cycle * (count // period + 1)
        return values[:count]
    if sweep.mode == ADDRESS and (first + count) <= (1 << 32):
        values = array("I", range(first, first + count))
        return complement(values) if sweep.xor else values
    return array("I", [sweep.expected(first + k) for k in range(count)])


_INVERT = bytes(255 - b for b in range(256))


def complement(values: array[int]) -> array[int]:
    """Every bit flipped (a byte translation in C, not a loop over the words)."""
    out = array("I")
    out.frombytes(values.tobytes().translate(_INVERT))
    return out


def _fill_then_check(mode: int, arg: int, xor: int) -> list[Sweep]:
    return [Sweep(True, mode, arg, xor), Sweep(False, mode, arg, xor)]


def _march(background: int) -> list[Sweep]:
    inverse = background ^ MASK32
    return [
        Sweep(True, SOLID, 0, background),
        Sweep(False, SOLID, 0, background, rewrite=True),
        Sweep(False, SOLID, 0, inverse, descending=True, rewrite=True),
        Sweep(False, SOLID, 0, background),
    ]


def pattern_sweeps(name: str, seed: int) -> list[Sweep]:
    """The sweeps of pattern ``name``; ``seed`` (32-bit) drives ``random`` only."""
    if name == "solid":
        return _fill_then_check(SOLID, 0, 0) + _fill_then_check(SOLID, 0, MASK32)
    if name == "checkerboard":
        return _fill_then_check(CHECKER, CHECKER_ARG, 0) + _fill_then_check(
            CHECKER, CHECKER_ARG, MASK32
        )
    if name == "walking":
        return [
            sweep
            for xor in (0, MASK32)
            for shift in range(32)
            for sweep in _fill_then_check(WALKING, shift, xor)
        ]
    if name == "address":
        return _fill_then_check(ADDRESS, 0, 0) + _fill_then_check(ADDRESS, 0, MASK32)
    if name == "moving-inversions":
        return _march(0) + _march(MASK32)
    if name == "random":
        return _fill_then_check(RANDOM, seed & MASK32, 0) + _fill_then_check(
            RANDOM, seed & MASK32, MASK32
        )
    raise UnknownPattern(unknown_pattern_message(name))


def unknown_pattern_message(name: str) -> str:
    """``unknown pattern 'x' (the patterns: solid, checkerboard, ...)``."""
    return f"unknown pattern {name!r} (the patterns: {', '.join(PATTERNS)})"


def parse_patterns(text: str | None) -> tuple[str, ...]:
    """``"solid,random"`` as names in the order given (None or empty: every pattern).

    Text that holds only separators (``",,"``) is refused: it names no pattern.
    """
    if text is None or not text.strip():
        return PATTERNS
    names: list[str] = []
    for raw in text.split(","):
        name = raw.strip().lower()
        if not name:
            continue
        if name not in PATTERNS:
            raise UnknownPattern(unknown_pattern_message(name))
        if name not in names:
            names.append(name)
    if not names:  # ",," names none: never read as "every pattern" (issue 36)
        raise UnknownPattern(f"{text!r} names no pattern (the patterns: {', '.join(PATTERNS)})")
    return tuple(names)


def pass_seed(seed: int, pass_index: int) -> int:
    """Each pass's ``random`` data differs, reproducibly from the run's seed."""
    return (seed + pass_index * SEED_MULTIPLIER) & MASK32
