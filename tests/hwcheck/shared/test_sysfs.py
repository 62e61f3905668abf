"""sysfs PCI scans over recorded trees, and over broken ones made at run time."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hwcheck.model import PciDevice
from hwcheck.sysfs import scan_cmp_devices, scan_nvidia_devices

DATA = Path(__file__).parents[1] / "data"


def test_four_card_rig_with_one_2082_board() -> None:
    assert scan_cmp_devices(DATA / "sys-rig4") == [
        PciDevice("0000:01:00.0", 0x10DE, 0x20C2),
        PciDevice("0000:02:00.0", 0x10DE, 0x20C2),
        PciDevice("0000:03:00.0", 0x10DE, 0x2082),
        PciDevice("0000:04:00.0", 0x10DE, 0x20C2),
    ]


def test_rig_where_a_card_vanished() -> None:
    found = scan_cmp_devices(DATA / "sys-rig4-vanished")

    assert [d.pci_bus_id for d in found] == ["0000:01:00.0", "0000:02:00.0", "0000:03:00.0"]


def test_mixed_machine_counts_only_the_cmp() -> None:
    assert scan_cmp_devices(DATA / "sys-mixed") == [PciDevice("0000:02:00.0", 0x10DE, 0x20C2)]


def test_nvidia_scan_lists_display_class_nvidia_devices_only() -> None:
    found = scan_nvidia_devices(DATA / "sys-mixed")

    # Not the Intel iGPU (display class, other vendor) nor the NVIDIA audio function.
    assert found == [
        PciDevice("0000:01:00.0", 0x10DE, 0x2504),
        PciDevice("0000:02:00.0", 0x10DE, 0x20C2),
    ]


def test_missing_sysfs_is_empty(tmp_path: Path) -> None:
    assert scan_cmp_devices(tmp_path / "nothing") == []
    assert scan_nvidia_devices(tmp_path) == []


def _device(root: Path, bdf: str, vendor: str, device: str) -> Path:
    path = root / "bus" / "pci" / "devices" / bdf
    path.mkdir(parents=True)
    (path / "vendor").write_text(vendor)
    (path / "device").write_text(device)
    (path / "class").write_text("0x030200\n")
    return path


def test_unreadable_entries_are_skipped_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _device(tmp_path, "0000:01:00.0", "0x10de\n", "0x20c2\n")
    _device(tmp_path, "0000:02:00.0", "garbage\n", "0x20c2\n")
    (_device(tmp_path, "0000:03:00.0", "0x10de\n", "0x20c2\n") / "device").unlink()
    broken = _device(tmp_path, "0000:04:00.0", "0x10de\n", "0x20c2\n")
    (broken / "vendor").unlink()
    (broken / "vendor").mkdir()  # reading it raises IsADirectoryError
    _device(tmp_path, "not-a-pci-address", "0x10de\n", "0x20c2\n")

    with caplog.at_level(logging.WARNING, logger="hwcheck.sysfs"):
        found = scan_cmp_devices(tmp_path)

    assert found == [PciDevice("0000:01:00.0", 0x10DE, 0x20C2)]
    skipped = [r.getMessage() for r in caplog.records]
    assert len(skipped) == 4
    assert any("0000:02:00.0" in m and "garbage" in m for m in skipped)


def test_bus_ids_are_normalised(tmp_path: Path) -> None:
    _device(tmp_path, "0000:DB:00.0", "0x10DE\n", "0x20C2\n")

    assert scan_cmp_devices(tmp_path) == [PciDevice("0000:db:00.0", 0x10DE, 0x20C2)]


def test_symlinked_layout_like_the_real_sysfs(tmp_path: Path) -> None:
    # In the real /sys, bus/pci/devices/<bdf> are links into the devices/ hierarchy.
    real = tmp_path / "devices" / "pci0000:00" / "0000:00:01.1" / "0000:01:00.0"
    real.mkdir(parents=True)
    (real / "vendor").write_text("0x10de\n")
    (real / "device").write_text("0x2082\n")
    (real / "class").write_text("0x030200\n")
    links = tmp_path / "bus" / "pci" / "devices"
    links.mkdir(parents=True)
    (links / "0000:01:00.0").symlink_to("../../../devices/pci0000:00/0000:00:01.1/0000:01:00.0")

    assert scan_cmp_devices(tmp_path) == [PciDevice("0000:01:00.0", 0x10DE, 0x2082)]
    assert scan_nvidia_devices(tmp_path) == [PciDevice("0000:01:00.0", 0x10DE, 0x2082)]
