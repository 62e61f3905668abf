"""The memory test as real child processes driving a real shared library through ctypes.

The library is the stand-in for libcuda.so.1 compiled from tests/hwcheck/fake_libcuda.c
(no GPU here), the same one the CUDA probe's tests use; everything between fleetd and that
boundary is the production path: the child, its patterns and compare, the time limit.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hwcheck import memtest_child
from hwcheck.memtest import SubprocessMemtester, parse_child_output, timeout_s
from hwcheck.memtest_child import Found, compare, pattern_value
from hwcheck.memtest_results import CardMemtest, MemtestOutcome, run_on_cards


def memtester(library: Path | str, mode: str, base_timeout_s: float = 60.0) -> SubprocessMemtester:
    env = dict(os.environ, CMPFLEET_LIBCUDA=str(library), FAKE_CUDA=mode)
    return SubprocessMemtester(env=env, base_timeout_s=base_timeout_s)


def test_a_healthy_card_passes_over_the_size_asked(fake_libcuda: Path) -> None:
    result = memtester(fake_libcuda, "ok").test(1, 200)

    assert result.outcome is MemtestOutcome.PASSED, result
    assert (result.card, result.tested_mib, result.bit_errors) == (1, 200, 0)
    assert result.first_error_offset is None


def test_bad_memory_is_counted_in_flipped_bits_with_where_and_which_pattern(
    fake_libcuda: Path,
) -> None:
    result = memtester(fake_libcuda, "bad_mem:3").test(3, 100)

    assert result.outcome is MemtestOutcome.FAILED
    assert result.bit_errors == 9  # 3 bits, read back wrong under each of the 3 patterns
    assert result.first_error_offset == 1024
    assert result.pattern == "0xaaaaaaaa"
    assert "card 3: FAILED, 9 bit errors in 100 MiB, first at 0x400" in result.summary()


def test_only_the_bad_card_fails(fake_libcuda: Path) -> None:
    results = run_on_cards(memtester(fake_libcuda, "bad_mem:1"), [0, 1, 2], 64)

    assert [r.outcome for r in results] == [
        MemtestOutcome.PASSED,
        MemtestOutcome.FAILED,
        MemtestOutcome.PASSED,
    ]


def test_a_card_whose_context_fails_is_an_error_with_the_cuda_name(fake_libcuda: Path) -> None:
    result = memtester(fake_libcuda, "ctx_fail:0").test(0, 64)

    assert result.outcome is MemtestOutcome.ERROR
    assert result.error == "CUDA_ERROR_DEVICES_UNAVAILABLE"
    assert not result.outcome.failure


def test_less_free_memory_tests_what_could_be_had(fake_libcuda: Path) -> None:
    result = memtester(fake_libcuda, "oom_after:2").test(0, 1024)

    assert result.outcome is MemtestOutcome.PASSED
    assert result.tested_mib == 128  # two 64 MiB blocks, then out of memory


def test_a_card_that_hangs_the_driver_times_out_and_the_rest_are_not_run(
    fake_libcuda: Path,
) -> None:
    started_s = time.monotonic()
    results = run_on_cards(memtester(fake_libcuda, "hang:1", base_timeout_s=5.0), [0, 1, 2], 1)

    assert time.monotonic() - started_s < 40
    assert [r.outcome for r in results] == [
        MemtestOutcome.PASSED,
        MemtestOutcome.TIMED_OUT,
        MemtestOutcome.NOT_RUN,
    ]
    assert results[1].outcome.failure


def test_no_driver_library_is_unavailable_not_a_failure(tmp_path: Path) -> None:
    result = memtester(tmp_path / "missing" / "libcuda.so.1", "ok").test(0, 64)

    assert result.outcome is MemtestOutcome.UNAVAILABLE
    assert "no CUDA driver library" in (result.error or "")


def test_the_time_limit_grows_with_the_size() -> None:
    assert timeout_s(0) == 60.0
    assert timeout_s(8192) == 60.0 + 8 * 30.0


@pytest.mark.parametrize(
    ("text", "timed_out", "outcome"),
    [
        ("", True, MemtestOutcome.TIMED_OUT),
        ("garbage\n", False, MemtestOutcome.ERROR),
        ('{"card": 5, "outcome": "passed"}\n', False, MemtestOutcome.ERROR),
        ('{"card": 2, "outcome": "bogus"}\n', False, MemtestOutcome.ERROR),
        ('{"card": 2, "outcome": "passed", "tested_mib": 64}\n', False, MemtestOutcome.PASSED),
    ],
)
def test_child_output(text: str, timed_out: bool, outcome: MemtestOutcome) -> None:
    assert parse_child_output(text, 2, timed_out).outcome is outcome


def test_compare_counts_bits_and_finds_the_first_bad_word() -> None:
    expected = bytes(4096)
    data = bytearray(expected)
    data[2052] = 0b101  # word 513 (byte 2052), two bits
    data[4000] = 0x80
    found = Found()

    compare(data, expected, 1 << 20, "0x00000000", found)

    assert (found.bit_errors, found.first_offset, found.pattern) == (
        3,
        (1 << 20) + 2052,
        "0x00000000",
    )


def test_patterns_alternate_bits_and_differ_per_block() -> None:
    assert pattern_value("0xaaaaaaaa", 7) == 0xAAAAAAAA
    assert pattern_value(memtest_child.UNIQUE, 0) != pattern_value(memtest_child.UNIQUE, 1)


def test_results_survive_their_dict_form() -> None:
    result = CardMemtest(3, MemtestOutcome.FAILED, 4096, 37, 0x1F400000, "0x55555555", None, 1.5)

    assert CardMemtest.from_dict(result.as_dict()) == result
