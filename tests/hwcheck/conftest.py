"""Fixtures shared by the hwcheck tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

FAKE_LIBCUDA_SOURCE = Path(__file__).with_name("fake_libcuda.c")


@pytest.fixture(scope="session")
def fake_libcuda(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The libcuda.so.1 stand-in (tests/hwcheck/fake_libcuda.c), compiled once per session."""
    compiler = shutil.which("cc")
    if compiler is None:
        if os.environ.get("CI") == "true":
            pytest.fail("cc (Debian package gcc) is needed to build the fake libcuda")
        pytest.skip("cc (Debian package gcc) is needed to build the fake libcuda")
    library = tmp_path_factory.mktemp("cuda") / "libcuda.so.1"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-o", str(library), str(FAKE_LIBCUDA_SOURCE)], check=True
    )
    return library
