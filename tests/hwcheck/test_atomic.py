"""``atomic_write``: whole files, the asked mode whatever the umask, no litter on failure."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from hwcheck.atomic import atomic_write


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask of 0: a file created with the default mode would be world-writable."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("open_umask")
def test_new_file_gets_0600_whatever_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "api-token"
    atomic_write(target, "secret\n")
    assert target.read_text() == "secret\n"
    assert _mode(target) == 0o600


@pytest.mark.usefixtures("open_umask")
def test_replacing_a_wider_file_narrows_it_and_keeps_only_the_new_bytes(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("old contents that are longer than the new ones")
    target.chmod(0o666)
    atomic_write(target, b"new")
    assert target.read_bytes() == b"new"
    assert _mode(target) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_mode_argument_is_applied(tmp_path: Path) -> None:
    target = tmp_path / "fleet.toml"
    atomic_write(target, "[rig]\n", mode=0o644)
    assert _mode(target) == 0o644


def test_failure_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "engine.pid"
    target.write_text("old")
    with pytest.raises(TypeError):
        atomic_write(target, 12345)  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["engine.pid"]


def test_missing_directory_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        atomic_write(tmp_path / "gone" / "file", "x")
