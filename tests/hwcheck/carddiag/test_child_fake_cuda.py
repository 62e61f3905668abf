"""The card diagnostics' child over the libcuda stand-in: the real ctypes path to the driver's edge.

``tests/hwcheck/fake_libcuda.c`` runs the ``diag_*`` kernels in C with the PTX's results,
pinned memory is host memory; so the child's driver calls, argument packing, read-back and
verdicts run for real. The PTX itself is checked by ptxas below and runs on a real card in
``bench/gpu_carddiag_check.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hwcheck.carddiag import child
from hwcheck.carddiag.cuda import ptx_text
from hwcheck.carddiag.diagnoser import SubprocessDiagnoser
from hwcheck.carddiag.model import CardDiag, DiagKind, DiagOutcome, DiagPlan
from hwcheck.carddiag.pcie import LinkFigures
from tests.support.ptxas import assemble


def env_of(fake_libcuda: Path, mode: str = "ok") -> dict[str, str]:
    return {**os.environ, "CMPFLEET_LIBCUDA": str(fake_libcuda), "FAKE_CUDA": mode}


def never() -> str | None:
    return None


def test_compute_passes_on_a_good_card_and_names_the_bad_sm(fake_libcuda: Path) -> None:
    good = SubprocessDiagnoser(env_of(fake_libcuda)).compute(0, DiagPlan(DiagKind.COMPUTE), never)
    assert good.outcome is DiagOutcome.PASSED, (good.error, good.findings)
    assert good.figures["sms_seen"] == 4
    bad = SubprocessDiagnoser(env_of(fake_libcuda, "bad_sm:2")).compute(
        2, DiagPlan(DiagKind.COMPUTE), never
    )
    assert bad.outcome is DiagOutcome.FAILED
    assert bad.figures["bad_sms"] == [1]
    assert bad.findings[0].startswith("FP32 FMA:")


def test_the_link_is_measured_and_a_flipped_bit_is_counted(fake_libcuda: Path) -> None:
    plan = DiagPlan(DiagKind.PCIE, transfer_mib=1, repeats=2)
    clean = SubprocessDiagnoser(env_of(fake_libcuda)).link(0, plan, never)
    assert isinstance(clean, LinkFigures)
    assert clean.mismatched_bytes == 0 and clean.h2d_gb_per_s > 0
    flipped = SubprocessDiagnoser(env_of(fake_libcuda, "flip_link:0")).link(0, plan, never)
    assert isinstance(flipped, LinkFigures) and flipped.mismatched_bytes == 1


def test_no_driver_or_a_refused_context_is_named_never_passed(
    fake_libcuda: Path, tmp_path: Path
) -> None:
    plan = DiagPlan(DiagKind.COMPUTE)
    missing = {**os.environ, "CMPFLEET_LIBCUDA": str(tmp_path / "nope.so")}
    unavailable = SubprocessDiagnoser(missing).compute(0, plan, never)
    assert unavailable.outcome is DiagOutcome.UNAVAILABLE
    refused = SubprocessDiagnoser(env_of(fake_libcuda, "ctx_fail:1")).compute(1, plan, never)
    assert isinstance(refused, CardDiag) and refused.outcome is DiagOutcome.ERROR
    assert refused.error == "CUDA_ERROR_DEVICES_UNAVAILABLE"


def test_the_stop_file_ends_the_child_stopped_hot(
    fake_libcuda: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CMPFLEET_LIBCUDA", str(fake_libcuda))
    monkeypatch.setenv("FAKE_CUDA", "ok")
    stop = tmp_path / "stop"
    stop.write_text("card 0 core 82 °C >= 80 °C")
    plan = DiagPlan(DiagKind.COMPUTE, seconds=600, stop_file=str(stop))
    result = child.run(0, plan)
    assert result["outcome"] == "stopped_hot"
    assert "core 82 °C" in str(result["verdict"])
    link = child.run(0, DiagPlan(DiagKind.PCIE, transfer_mib=1, stop_file=str(stop)))
    assert link["stopped"] == "card 0 core 82 °C >= 80 °C"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptxas_accepts_the_diagnostic_kernels(tmp_path: Path, arch: str) -> None:
    done = assemble(ptx_text(), tmp_path, arch)
    assert done.returncode == 0, done.stderr


def test_the_memory_test_child_obeys_the_stop_file(
    fake_libcuda: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hwcheck.memtest.child import ProgressPrinter, run_card
    from hwcheck.memtest.cuda import load_driver
    from hwcheck.memtest.results import MemtestOutcome, MemtestPlan

    monkeypatch.setenv("FAKE_CUDA", "ok")
    stop = tmp_path / "stop"
    stop.write_text("card 0 HBM 86 °C >= 85 °C")
    plan = MemtestPlan(mib=4, patterns=("solid",), stress_s=60, stop_file=str(stop))
    result = run_card(load_driver(str(fake_libcuda)), 0, plan, ProgressPrinter())
    assert result.outcome is MemtestOutcome.STOPPED_HOT
    assert result.verdict is not None and "HBM 86 °C" in result.verdict
