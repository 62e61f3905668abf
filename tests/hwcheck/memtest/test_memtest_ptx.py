"""The shipped kernels (hwcheck/memtest/memtest.ptx) assemble for the cards' architecture, sm_80.

ptxas comes from the ``nvidia-cuda-nvcc-cu12`` wheel of the dev extra (no GPU, no CUDA
toolkit), so a typo in a kernel fails here, not on a rig. The kernels' parameter lists
are the ABI ``hwcheck.memtest.cuda`` launches them with (and the fake libcuda reads).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hwcheck.memtest.cuda import ptx_text
from tests.support.ptxas import assemble

FILL_PARAMS = ["u64 p_ptr", "u64 p_nvec", "u64 p_word0", "u32 p_mode", "u32 p_arg", "u32 p_xor"]
VERIFY_PARAMS = [
    *FILL_PARAMS,
    "u32 p_flags",
    "u64 p_results",
    "u64 p_blocks",
    "u32 p_block_shift",
    "u32 p_max_records",
]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptxas_accepts_the_shipped_kernels(tmp_path: Path, arch: str) -> None:
    done = assemble(ptx_text(), tmp_path, arch)

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "kernels.cubin").stat().st_size > 0


def test_a_broken_kernel_is_refused(tmp_path: Path) -> None:
    broken = ptx_text().replace(b"st.global.v4.u32", b"st.global.v5.u32", 1)

    done = assemble(broken, tmp_path, "sm_80")

    assert done.returncode != 0
    assert "error" in done.stderr.lower()


def test_the_kernels_target_the_cards_and_drivers_535_and_newer() -> None:
    text = ptx_text().decode()

    assert re.search(r"^\.version 7\.0$", text, re.MULTILINE)  # CUDA 11.0's ISA, R450+
    assert re.search(r"^\.target sm_80$", text, re.MULTILINE)  # the CMP 170HX's GA100
    assert re.search(r"^\.address_size 64$", text, re.MULTILINE)


@pytest.mark.parametrize(
    ("entry", "params"), [("memtest_fill", FILL_PARAMS), ("memtest_verify", VERIFY_PARAMS)]
)
def test_the_kernel_parameters_are_the_ones_launched(entry: str, params: list[str]) -> None:
    text = ptx_text().decode()
    match = re.search(rf"\.entry {entry}\((.*?)\)", text, re.DOTALL)
    assert match is not None
    found = [" ".join(p.split()).removeprefix(".param .") for p in match.group(1).split(",")]

    assert found == params
