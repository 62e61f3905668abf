"""Reading a file a person named: only a regular file, bounded, never a hang (issue 33).

Every node is made in the test's temporary directory (``tests.support.nodes``): a FIFO
with no writer would block a plain ``open`` forever, a device would be read without end.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hwcheck.atomic import NotARegularFile
from hwcheck.regular_file import FileTooLarge, open_regular, read_regular
from tests.support.nodes import KINDS, make_node


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_node_is_refused_without_being_opened_for_long(tmp_path: Path, kind: str) -> None:
    node = make_node(kind, tmp_path / "fleet.toml")
    with pytest.raises(NotARegularFile) as caught:
        read_regular(node)
    assert caught.value.what == KINDS[kind]
    assert str(caught.value) == f"{node}: {KINDS[kind]}, not a regular file: not read"


def test_a_symlink_is_followed_and_a_loop_is_one_line(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    real.write_text("[rig]\n")
    link = tmp_path / "fleet.toml"
    link.symlink_to(real)
    assert read_regular(link) == b"[rig]\n"
    loop = tmp_path / "loop.toml"
    loop.symlink_to(loop)
    with pytest.raises(NotARegularFile) as caught:
        read_regular(loop)
    assert caught.value.what == "a loop of symbolic links"


def test_what_is_read_whole_is_bounded(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * 2048)
    assert read_regular(big, max_bytes=2048) == b"#" * 2048
    with pytest.raises(FileTooLarge, match="larger than 1 KiB"):
        read_regular(big, max_bytes=1024)


def test_a_regular_file_streams_with_blocking_reads(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_bytes(b"line 1\nline 2\n")
    with open_regular(log) as stream:
        assert stream.read() == b"line 1\nline 2\n"
    with pytest.raises(FileNotFoundError):
        open_regular(tmp_path / "absent")
