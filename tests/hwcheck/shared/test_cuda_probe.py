"""The CUDA probe as a real subprocess driving a real shared library through ctypes.

The library is a stand-in for libcuda.so.1 compiled from tests/hwcheck/fake_libcuda.c
(no GPU here); everything between fleetd and that boundary is the production path.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from hwcheck.cuda_probe import SubprocessCudaProber, parse_probe_output
from hwcheck.cuda_results import CardProbe, ProbeOutcome


def prober(library: Path | str, mode: str, timeout_s: float = 20.0) -> SubprocessCudaProber:
    env = dict(os.environ, CMPFLEET_LIBCUDA=str(library), FAKE_CUDA=mode)
    return SubprocessCudaProber(timeout_s=timeout_s, env=env)


def test_a_healthy_rig_probes_ok_on_every_card(fake_libcuda: Path) -> None:
    assert prober(fake_libcuda, "ok").probe([0, 1, 2, 3]) == tuple(
        CardProbe(card, ProbeOutcome.OK) for card in range(4)
    )


def test_a_wedged_card_fails_with_the_cuda_error_name(fake_libcuda: Path) -> None:
    results = prober(fake_libcuda, "ctx_fail:2").probe([0, 1, 2, 3])
    assert results[2] == CardProbe(2, ProbeOutcome.FAILED, "CUDA_ERROR_DEVICES_UNAVAILABLE")
    assert [r.outcome for r in results[:2]] == [ProbeOutcome.OK, ProbeOutcome.OK]
    assert results[3].outcome is ProbeOutcome.OK


def test_a_driver_that_will_not_initialise_fails_every_card(fake_libcuda: Path) -> None:
    results = prober(fake_libcuda, "init_fail").probe([0, 1])
    assert {r.error for r in results} == {"CUDA_ERROR_NOT_INITIALIZED"}
    assert {r.outcome for r in results} == {ProbeOutcome.FAILED}


def test_a_card_that_hangs_the_driver_times_out_and_the_others_keep_their_result(
    fake_libcuda: Path,
) -> None:
    started = time.monotonic()
    # 4 s: long enough for card 0's child to answer on a loaded machine, well below 10.
    results = prober(fake_libcuda, "hang:1", timeout_s=4).probe([0, 1, 2])
    assert time.monotonic() - started < 12
    assert results[0] == CardProbe(0, ProbeOutcome.OK)
    assert results[1].outcome is ProbeOutcome.TIMED_OUT
    assert results[2].outcome is ProbeOutcome.TIMED_OUT


def test_no_driver_library_is_unavailable_not_a_failure(tmp_path: Path) -> None:
    results = prober(tmp_path / "missing" / "libcuda.so.1", "ok").probe([0, 1])
    assert {r.outcome for r in results} == {ProbeOutcome.UNAVAILABLE}
    assert all("no CUDA driver library" in (r.error or "") for r in results)


def test_output_the_child_never_finished_is_a_failure() -> None:
    results = parse_probe_output(
        '{"card": 0, "outcome": "ok", "error": null}\nnot json\n', [0, 1], timed_out=False
    )
    assert results == (
        CardProbe(0, ProbeOutcome.OK),
        CardProbe(1, ProbeOutcome.FAILED, "the probe ended without a result"),
    )
