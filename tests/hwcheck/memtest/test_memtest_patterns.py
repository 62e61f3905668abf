"""The memory test's pattern values and sweeps (pure functions; the kernels compute the same)."""

from __future__ import annotations

import pytest

from hwcheck.memtest.patterns import (
    ADDRESS,
    CHECKER,
    MASK32,
    PATTERNS,
    RANDOM,
    SOLID,
    WALKING,
    Sweep,
    UnknownPattern,
    parse_patterns,
    pass_seed,
    pattern_sweeps,
    sweep_values,
    word_value,
)


def test_word_values_of_each_mode() -> None:
    assert word_value(SOLID, 0x12345678, 99) == 0x12345678
    assert [word_value(CHECKER, 0x55555555, w) for w in (0, 1, 2)] == [
        0x55555555,
        0xAAAAAAAA,
        0x55555555,
    ]
    assert [word_value(WALKING, 3, w) for w in (0, 1, 28, 29)] == [8, 16, 1 << 31, 1]
    assert word_value(ADDRESS, 0, 12345) == 12345
    assert word_value(ADDRESS, 0, (1 << 32) + 5) == (5 + 0x9E3779B1) & MASK32
    # lowbias32 of index ^ (seed + high32 * 0x9E3779B9), checked against a C build of the
    # same hash: pinned so a change to either twin (PTX or Python) is deliberate
    assert word_value(RANDOM, 0, 1) == 0x688990C0
    assert word_value(RANDOM, 0xDEADBEEF, (1 << 32) + 7) == 0xDA01AC2B
    assert word_value(RANDOM, 7, 1) != word_value(RANDOM, 8, 1)


@pytest.mark.parametrize(
    "sweep",
    [
        Sweep(True, SOLID, 0, MASK32),
        Sweep(True, CHECKER, 0x55555555, MASK32),
        Sweep(True, WALKING, 5),
        Sweep(True, WALKING, 31, MASK32),
        Sweep(True, ADDRESS, 0),
        Sweep(True, ADDRESS, 0, MASK32),
        Sweep(True, RANDOM, 1234, MASK32),
    ],
)
@pytest.mark.parametrize(("first", "count"), [(0, 100), (37, 64), ((1 << 32) - 10, 20)])
def test_bulk_values_equal_the_word_by_word_values(sweep: Sweep, first: int, count: int) -> None:
    assert list(sweep_values(sweep, first, count)) == [
        sweep.expected(first + k) for k in range(count)
    ]


def test_every_bit_sees_both_values_in_each_pattern() -> None:
    for name in PATTERNS:
        fills = [s for s in pattern_sweeps(name, 42) if s.fill]
        for word in (0, 1, 31, 4097):
            ones = 0
            zeros = MASK32
            for sweep in fills:
                ones |= sweep.expected(word)
                zeros &= sweep.expected(word)
            assert (ones, zeros) == (MASK32, 0), name


def test_the_march_fills_then_inverts_up_then_down_then_checks() -> None:
    sweeps = pattern_sweeps("moving-inversions", 0)

    assert [(s.fill, s.descending, s.rewrite, s.xor) for s in sweeps[:4]] == [
        (True, False, False, 0),
        (False, False, True, 0),
        (False, True, True, MASK32),
        (False, False, False, 0),
    ]
    assert [s.xor for s in sweeps[4:]] == [MASK32, MASK32, 0, MASK32]  # on a background of ones
    assert len(pattern_sweeps("walking", 0)) == 128  # 32 bit lines, ones and zeros, fill+check


def test_patterns_by_name() -> None:
    assert parse_patterns(None) == PATTERNS
    assert parse_patterns(" Random, solid,random ") == ("random", "solid")
    with pytest.raises(UnknownPattern) as caught:
        parse_patterns("solid,marchx")
    assert str(caught.value) == (
        "unknown pattern 'marchx' (the patterns: solid, checkerboard, walking, address, "
        "moving-inversions, random)"
    )


def test_each_pass_has_its_own_random_data() -> None:
    assert pass_seed(5, 0) == 5
    assert pass_seed(5, 1) != pass_seed(5, 0)
