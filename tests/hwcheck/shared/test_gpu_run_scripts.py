"""The prepared GPU runs (bench/gpu_memtest_check.py, bench/gpu_carddiag_check.py) run end to
end here against the fake libcuda, so a device loan never finds them broken.

What only a real card can say (the memory test's bandwidth against the card's own copy) is
the one step allowed to fail on the fake; every other step must pass, the summary must land
under ``$OUT`` with each step, and without a library the run says "no GPU" and exits 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BANDWIDTH_STEP = "4-6 every pattern over 0.01 GiB, planted faults, bench"


def run_script(script: str, library: Path | None, out: Path, *args: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "CMPFLEET_LIBCUDA"}
    env["OUT"] = str(out)
    env["CMPFLEET_LIBCUDA"] = str(library) if library is not None else str(out / "absent.so")
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return result.returncode, result.stdout + result.stderr


def steps(out: Path, name: str) -> dict[str, bool]:
    summary = json.loads((out / name).read_text())
    assert summary["gpu"] is True and "watchdog" not in summary
    return {step: figures["ok"] for step, figures in summary["steps"].items()}


def test_the_card_diagnostics_run_passes_every_step_on_the_fake(
    fake_libcuda: Path, tmp_path: Path
) -> None:
    code, text = run_script(
        "gpu_carddiag_check.py", fake_libcuda, tmp_path, "--seconds", "0.5", "--transfer-mib", "4"
    )
    assert code == 0, text
    found = steps(tmp_path, "carddiag_gpu.json")
    assert len(found) == 6 and all(found.values()), found


def test_the_memory_test_run_passes_all_but_the_real_cards_bandwidth_on_the_fake(
    fake_libcuda: Path, tmp_path: Path
) -> None:
    code, text = run_script(
        "gpu_memtest_check.py", fake_libcuda, tmp_path, "--gib", "0.01", "--stress-s", "0.2"
    )
    found = steps(tmp_path, "memtest_gpu.json")
    assert len(found) == 5, found
    assert {step for step, ok in found.items() if not ok} <= {BANDWIDTH_STEP}, text
    assert code == (0 if all(found.values()) else 1)


def test_without_a_driver_library_each_run_says_no_gpu_and_exits_0(tmp_path: Path) -> None:
    for script, name in (
        ("gpu_carddiag_check.py", "carddiag_gpu.json"),
        ("gpu_memtest_check.py", "memtest_gpu.json"),
    ):
        code, text = run_script(script, None, tmp_path)
        assert code == 0 and "no GPU:" in text, text
        summary = json.loads((tmp_path / name).read_text())
        assert summary["gpu"] is False and summary["passed"] is True
