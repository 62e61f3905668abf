"""The memory test as real child processes driving a real shared library through ctypes.

The library is the stand-in for libcuda.so.1 compiled from tests/hwcheck/fake_libcuda.c
(no GPU here), the same one the CUDA probe's tests use: its device memory is host memory
and its cuLaunchKernel runs the two kernels' semantics in C. Everything between fleetd
and that boundary is the production path: the child, the runner, the ctypes launches and
read-backs, the progress lines, the time limits. The PTX itself is checked by ptxas
(test_memtest_ptx) and runs on a real card in bench/gpu_memtest_check.py.
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

import pytest

from hwcheck.memtest.children import SubprocessMemtester, parse_child_output, progress_of, timeout_s
from hwcheck.memtest.cuda import CardMemory, load_driver
from hwcheck.memtest.patterns import RANDOM, WALKING, Sweep
from hwcheck.memtest.results import (
    BadWord,
    CardMemtest,
    MemtestOutcome,
    MemtestPlan,
    MemtestProgress,
    PatternRun,
    ignore_progress,
    run_on_cards,
)

QUICK = MemtestPlan(mib=16, patterns=("solid", "random", "moving-inversions"), seed=9)


def memtester(library: Path | str, mode: str, silence_s: float = 90.0) -> SubprocessMemtester:
    env = dict(os.environ, CMPFLEET_LIBCUDA=str(library), FAKE_CUDA=mode)
    return SubprocessMemtester(env=env, silence_s=silence_s)


def test_a_healthy_card_passes_over_the_size_asked_with_every_pattern_reported(
    fake_libcuda: Path,
) -> None:
    seen: list[MemtestProgress] = []

    result = memtester(fake_libcuda, "ok").test(1, QUICK, seen.append)

    assert result.outcome is MemtestOutcome.PASSED, result
    assert (result.card, result.tested_mib, result.bit_errors, result.blocks) == (1, 16, 0, ())
    assert [run.pattern for run in result.runs] == ["solid", "random", "moving-inversions"]
    assert (result.blocks_tested, result.block_kib, result.seed) == (8, 2048, 9)
    assert {p.card for p in seen} == {1}
    assert seen[-1].pattern == "moving-inversions"
    assert seen[-1].step == seen[-1].steps == 8


def test_bad_memory_is_counted_with_where_which_pattern_and_the_block_map(
    fake_libcuda: Path,
) -> None:
    result = memtester(fake_libcuda, "bad_mem:3").test(3, QUICK, ignore_progress)

    assert result.outcome is MemtestOutcome.FAILED
    assert result.first_error_offset == 1024
    assert result.pattern == "solid"
    assert result.blocks == ((0, result.bad_words),)
    solid = result.runs[0]
    assert solid.first_bad == (BadWord(1024, 0, 0x00010101),)  # three bits stuck at 1
    assert (solid.bad_words, solid.bit_errors) == (1, 3)
    assert result.verdict is not None
    assert result.verdict.startswith("a few fixed blocks: 1 of 8 2 MiB blocks fail (#0)")
    assert "card 3: FAILED" in result.summary()


def test_the_planted_fault_is_found_on_a_healthy_card_and_left_out(fake_libcuda: Path) -> None:
    plan = MemtestPlan(mib=4, patterns=("walking", "address"), stress_s=0.2, inject=True)

    result = memtester(fake_libcuda, "ok").test(0, plan, ignore_progress)

    assert result.outcome is MemtestOutcome.PASSED, result
    assert (result.planted, result.planted_found, result.bad_words) == (3, 3, 0)
    assert result.runs[-1].pattern == "stress"
    assert result.runs[-1].cycles >= 1


def test_a_planted_fault_that_is_not_found_makes_the_run_untrusted(fake_libcuda: Path) -> None:
    plan = MemtestPlan(mib=8, patterns=("solid",), inject=True)

    result = memtester(fake_libcuda, "no_plant").test(0, plan, ignore_progress)

    assert result.outcome is MemtestOutcome.ERROR
    assert not result.outcome.failure  # no verdict on the card's memory either way
    assert result.error == (
        "the self-test planted 1 fault(s) and found 0: the test does not work on this card"
    )


def test_kernels_the_driver_refuses_are_an_error_with_its_log(fake_libcuda: Path) -> None:
    result = memtester(fake_libcuda, "jit_fail").test(0, QUICK, ignore_progress)

    assert result.outcome is MemtestOutcome.ERROR
    assert result.error == (
        "CUDA_ERROR_INVALID_PTX (ptxas fatal   : Unresolved extern function 'x')"
    )


def test_a_card_whose_context_fails_is_an_error_with_the_cuda_name(fake_libcuda: Path) -> None:
    result = memtester(fake_libcuda, "ctx_fail:0").test(0, QUICK, ignore_progress)

    assert result.outcome is MemtestOutcome.ERROR
    assert result.error == "CUDA_ERROR_DEVICES_UNAVAILABLE"


def test_all_free_memory_less_the_reserve_by_default(fake_libcuda: Path) -> None:
    plan = MemtestPlan(patterns=("solid",))
    env = dict(os.environ, CMPFLEET_LIBCUDA=str(fake_libcuda), FAKE_CUDA_FREE_MIB="300")

    result = SubprocessMemtester(env=env).test(0, plan, ignore_progress)

    assert result.outcome is MemtestOutcome.PASSED
    assert result.tested_mib == 300 - 256  # the free memory less the reserve


def test_when_the_card_runs_out_the_test_covers_what_it_could_have(fake_libcuda: Path) -> None:
    env = dict(
        os.environ,
        CMPFLEET_LIBCUDA=str(fake_libcuda),
        FAKE_CUDA="oom_over_mib:100",
        FAKE_CUDA_FREE_MIB="2000",
    )
    plan = MemtestPlan(patterns=("solid",))

    result = SubprocessMemtester(env=env).test(0, plan, ignore_progress)

    assert result.outcome is MemtestOutcome.PASSED
    # 512 MiB chunks fail, then smaller ones are taken while they fit (the map and the
    # counters take a little of the 100 MiB)
    assert 94 <= result.tested_mib < 100


def test_every_card_at_once_and_a_hung_one_is_abandoned_alone(fake_libcuda: Path) -> None:
    started_s = time.monotonic()
    tester = memtester(fake_libcuda, "hang:1", silence_s=3.0)

    results = run_on_cards(tester, [0, 1, 2], QUICK)

    assert time.monotonic() - started_s < 40
    assert [r.outcome for r in results] == [
        MemtestOutcome.PASSED,
        MemtestOutcome.TIMED_OUT,
        MemtestOutcome.PASSED,
    ]
    assert results[1].outcome.failure


def test_no_driver_library_is_unavailable_not_a_failure(tmp_path: Path) -> None:
    result = memtester(tmp_path / "missing" / "libcuda.so.1", "ok").test(0, QUICK, ignore_progress)

    assert result.outcome is MemtestOutcome.UNAVAILABLE
    assert "no CUDA driver library" in (result.error or "")


def test_the_stand_in_kernels_write_what_the_python_twin_computes(fake_libcuda: Path) -> None:
    """The fake's C port agrees with word_value (the GPU check compares the PTX the same way)."""
    os.environ.pop("FAKE_CUDA", None)
    lib: ctypes.CDLL = load_driver(str(fake_libcuda))
    memory = CardMemory(lib, 0, 8 << 20, chunk_bytes=4 << 20)
    try:
        for sweep in (Sweep(True, RANDOM, 77, 0xFFFFFFFF), Sweep(True, WALKING, 3)):
            memory.sweep(sweep, 0, memory.words)
            first = memory.chunks[1].first + 100
            got = memory.read_words(first, 64)
            assert list(got) == [sweep.expected(first + k) for k in range(64)]
    finally:
        memory.close()


def test_the_time_limit_grows_with_the_size_the_patterns_and_the_stress() -> None:
    small = timeout_s(MemtestPlan(mib=1024, patterns=("solid",)))
    assert small == pytest.approx(120 + 4 * 2 * 1 / 10)
    assert timeout_s(MemtestPlan(mib=2048, patterns=("solid",))) > small
    assert timeout_s(MemtestPlan(mib=1024, patterns=("solid",), stress_s=600)) == small + 600
    assert timeout_s(MemtestPlan(patterns=("solid",))) > small  # all free: the largest card


@pytest.mark.parametrize(
    ("text", "timed_out", "outcome"),
    [
        ("", True, MemtestOutcome.TIMED_OUT),
        ("garbage\n", False, MemtestOutcome.ERROR),
        ('{"card": 5, "outcome": "passed"}\n', False, MemtestOutcome.ERROR),
        ('{"card": 2, "outcome": "bogus"}\n', False, MemtestOutcome.ERROR),
        ('{"progress": {"pattern": "solid"}}\n', True, MemtestOutcome.TIMED_OUT),
        ('{"card": 2, "outcome": "passed", "tested_mib": 64}\n', False, MemtestOutcome.PASSED),
    ],
)
def test_child_output(text: str, timed_out: bool, outcome: MemtestOutcome) -> None:
    assert parse_child_output(text, 2, timed_out).outcome is outcome


def test_progress_lines() -> None:
    line = '{"progress": {"pattern": "walking", "pass_number": 1, "passes": 2, "step": 17, "steps": 128}}'

    progress = progress_of(line, 4)

    assert progress == MemtestProgress(4, "walking", 1, 2, 17, 128)
    assert progress.line() == "card 4: walking pass 1/2, sweep 17/128"
    assert MemtestProgress(0, "stress", step=40, bad_words=3).line() == (
        "card 0: stress, cycle 40, 3 bad words"
    )
    assert progress_of('{"card": 4}', 4) is None
    assert progress_of("not json", 4) is None


def test_results_survive_their_dict_form_and_old_records_still_read() -> None:
    run = PatternRun("solid", 1, 3, 1, 0, (BadWord(4096, 0, 7),), ((0, 1),), 1, 0.5, 900.0)
    result = CardMemtest(
        3, MemtestOutcome.FAILED, 4096, 37, 0x1F400000, "solid", None, 1.5, runs=(run,)
    )

    assert CardMemtest.from_dict(result.as_dict()) == result
    old = {"card": 3, "outcome": "failed", "tested_mib": 4096, "bit_errors": 37}
    assert CardMemtest.from_dict(old).runs == ()
