"""The loaded kernel module's version, read from recorded /proc and /sys trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwcheck.driver_module import library_driver_version, read_kernel_module_version

DATA = Path(__file__).parents[1] / "data"
EMPTY = DATA / "does-not-exist"


@pytest.mark.parametrize(
    ("tree", "version"),
    [("proc-driver-open", "580.95.05"), ("proc-driver-proprietary", "535.104.05")],
)
def test_the_proc_version_file_names_the_module(tree: str, version: str) -> None:
    assert read_kernel_module_version(proc_root=DATA / tree, sys_root=EMPTY) == version


def test_sys_module_version_is_the_fallback() -> None:
    assert read_kernel_module_version(EMPTY, DATA / "sys-module-only") == "575.64.03"


def test_no_module_loaded_is_none() -> None:
    assert read_kernel_module_version(EMPTY, EMPTY) is None


def test_a_version_file_without_a_version_falls_back(tmp_path: Path) -> None:
    (tmp_path / "driver" / "nvidia").mkdir(parents=True)
    (tmp_path / "driver" / "nvidia" / "version").write_text("NVRM version: garbled\n")
    assert read_kernel_module_version(tmp_path, DATA / "sys-module-only") == "575.64.03"


@pytest.mark.parametrize(
    ("nvml", "driver"),
    [("13.580.95.05", "580.95.05"), ("11.470.57.02", "470.57.02"), ("12", None), (None, None)],
)
def test_the_library_driver_version_is_nvml_version_without_the_cuda_major(
    nvml: str | None, driver: str | None
) -> None:
    assert library_driver_version(nvml) == driver
