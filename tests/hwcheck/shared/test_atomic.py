"""``atomic_write``: whole files, the asked mode whatever the umask, no litter on failure."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from hwcheck.atomic import NotARegularFile, atomic_write
from tests.support.nodes import KINDS, make_node, snapshot


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


# -- where it writes: only a regular file (issue 33) ---------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_what_is_not_a_regular_file_is_refused_and_left_as_it_was(
    tmp_path: Path, kind: str
) -> None:
    node = make_node(kind, tmp_path / "fleet.toml")
    before = snapshot(node)
    with pytest.raises(NotARegularFile) as caught:
        atomic_write(node, "[rig]\n")
    assert caught.value.what == KINDS[kind]
    assert str(node) in str(caught.value) and "left as it was" in str(caught.value)
    assert snapshot(node) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleet.toml"]  # no temporary left


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "managed" / "fleet.toml"
    real.parent.mkdir()
    real.write_text("old\n")
    real.chmod(0o640)
    link = tmp_path / "fleet.toml"
    link.symlink_to(Path("managed") / "fleet.toml")  # relative, as config management makes
    assert atomic_write(link, "new\n", keep_mode=True) == real
    assert link.is_symlink() and real.read_text() == "new\n"
    assert _mode(real) == 0o640  # keep_mode: the person's mode stays


def test_a_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "fleet.toml"
    link.symlink_to(tmp_path / "target.toml")
    atomic_write(link, "x\n")
    assert link.is_symlink() and (tmp_path / "target.toml").read_text() == "x\n"


def test_a_link_to_a_device_or_a_loop_is_refused(tmp_path: Path) -> None:
    fifo = make_node("fifo", tmp_path / "pipe")
    to_fifo = tmp_path / "to-fifo"
    to_fifo.symlink_to(fifo)
    with pytest.raises(NotARegularFile, match="a link to"):
        atomic_write(to_fifo, "x")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(NotARegularFile) as caught:
        atomic_write(loop, "x")
    assert caught.value.what == "a loop of symbolic links"
    assert loop.is_symlink()


def test_a_hard_linked_file_is_refused_rather_than_split(tmp_path: Path) -> None:
    first = tmp_path / "fleet.toml"
    first.write_text("old\n")
    os.link(first, tmp_path / "other-name.toml")
    with pytest.raises(NotARegularFile, match="2 hard links"):
        atomic_write(first, "new\n")
    assert (tmp_path / "other-name.toml").read_text() == "old\n" == first.read_text()
