"""ptxas from the ``nvidia-cuda-nvcc-cu12`` wheel of the dev extra: shipped PTX checked for sm_80.

No GPU and no CUDA toolkit: a typo in a kernel fails the suite, not a rig.
"""

from __future__ import annotations

import importlib.util
import platform
import subprocess
import sys
from pathlib import Path

import pytest


def ptxas() -> Path:
    """The wheel's ptxas (``nvidia/cuda_nvcc/bin/ptxas``)."""
    if not (sys.platform == "linux" and platform.machine() == "x86_64"):
        pytest.skip("the nvidia-cuda-nvcc-cu12 wheel exists for x86_64 Linux only")
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(base) / "cuda_nvcc" / "bin" / "ptxas"
        if candidate.is_file():
            return candidate
    pytest.fail("ptxas not found: install the dev extra (pip install -e '.[dev]')")


def assemble(source: bytes, tmp_path: Path, arch: str) -> subprocess.CompletedProcess[str]:
    """``ptxas -arch=ARCH`` over ``source``; the cubin lands beside it in ``tmp_path``."""
    path = tmp_path / "kernels.ptx"
    path.write_bytes(source)
    return subprocess.run(
        [str(ptxas()), f"-arch={arch}", str(path), "-o", str(tmp_path / "kernels.cubin")],
        capture_output=True,
        text=True,
        check=False,
    )
