"""read_boot_id on a recorded tree, the real /proc, and broken inputs."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from hwcheck.bootid import BootIdError, read_boot_id

DATA = Path(__file__).parents[1] / "data"


def test_recorded_boot_id_is_stripped() -> None:
    assert read_boot_id(DATA / "proc-boot") == "3f1c2b9e-7d4a-4c1e-9b2f-5a6d8e0c1f27"


def test_real_boot_id_is_a_stable_uuid() -> None:
    first = read_boot_id()

    assert str(uuid.UUID(first)) == first
    assert read_boot_id() == first


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(BootIdError, match=r"sys/kernel/random/boot_id: No such file"):
        read_boot_id(tmp_path)


def test_empty_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "sys" / "kernel" / "random" / "boot_id"
    path.parent.mkdir(parents=True)
    path.write_text("\n")

    with pytest.raises(BootIdError, match="empty"):
        read_boot_id(tmp_path)
