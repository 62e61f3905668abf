"""FileSource follows a file like tail -F; KmsgFileWriter appends kmsg records safely."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hwcheck.kernellog import filelog
from hwcheck.kernellog.errors import KernelLogUnavailable
from hwcheck.kernellog.filelog import FileSource, KmsgFileWriter
from hwcheck.kernellog.kmsg_format import parse_kmsg_record
from hwcheck.kernellog.records import KernelLogCursor

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
BOOT = "8b3f5c1e-2d4a-4f6b-9c8d-7e6f5a4b3c2d"


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as out:
        out.write(text)


def _texts(source: FileSource) -> list[str]:
    return [record.text for record in source.read_available()]


def test_partial_last_line_is_held_until_completed(tmp_path: Path) -> None:
    path = tmp_path / "kmsg"
    path.write_text("6,0,100,-;hello\n6,1,200,-;wor")
    source = FileSource(path, None, BOOT)
    records = source.read_available()
    assert [(r.seq, r.text, r.timestamp_usec, r.boot_id) for r in records] == [
        (0, "hello", 100, BOOT)
    ]
    assert source.read_available() == []
    _append(path, "ld\n")
    assert [(r.seq, r.text) for r in source.read_available()] == [(1, "world")]
    source.close()


def test_file_that_does_not_exist_yet(tmp_path: Path) -> None:
    path = tmp_path / "later.log"
    source = FileSource(path, None, BOOT, from_start=False)
    assert source.read_available() == []
    assert source.wait(0.05) is False
    path.write_text("first line\nsecond line\n")
    assert source.wait(5.0) is True
    # A file that appears is new content: read from its start even with from_start=False.
    assert _texts(source) == ["first line", "second line"]
    assert source.wait(0.05) is False
    source.close()


def test_unwatched_a_quiet_file_is_looked_at_less_often_and_a_change_restores_the_pace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without inotify the gap doubles while nothing changes, up to a cap; a change resets it."""
    monkeypatch.setattr(filelog, "open_watch", lambda path: None)
    path = tmp_path / "kern.log"
    path.write_text("a\n")
    source = FileSource(path, None, BOOT, poll_interval_s=0.05)
    assert _texts(source) == ["a"]
    slept: list[float] = []
    now = [1000.0]

    def sleep(seconds: float) -> None:
        slept.append(round(seconds, 3))
        now[0] += seconds
        if len(slept) == 8:
            _append(path, "b\n")

    monkeypatch.setattr(filelog.time, "sleep", sleep)
    monkeypatch.setattr(filelog.time, "monotonic", lambda: now[0])
    assert source.wait(60.0) is True
    assert slept == [0.05, 0.1, 0.2, 0.4, 0.4, 0.4, 0.4, 0.4]
    assert _texts(source) == ["b"]
    slept.clear()
    assert source.wait(0.12) is False  # the fast pace again, cut at the timeout
    assert slept == [0.05, 0.07]
    source.close()


def test_truncation_restarts_from_the_top(tmp_path: Path) -> None:
    path = tmp_path / "kern.log"
    path.write_text("one\ntwo\nthree\n")
    source = FileSource(path, None, BOOT)
    assert _texts(source) == ["one", "two", "three"]
    path.write_text("new\n")  # truncates, then writes less than before
    assert source.wait(5.0) is True
    assert _texts(source) == ["new"]
    source.close()


def test_replacement_by_a_new_file_finishes_the_old_one_first(tmp_path: Path) -> None:
    path = tmp_path / "kern.log"
    path.write_text("old 1\n")
    source = FileSource(path, None, BOOT)
    assert _texts(source) == ["old 1"]
    _append(path, "old 2\nold partial")
    path.rename(tmp_path / "kern.log.1")
    path.write_text("new 1\n")
    assert source.wait(5.0) is True
    assert _texts(source) == ["old 2", "old partial", "new 1"]
    _append(path, "new 2\n")
    assert _texts(source) == ["new 2"]
    source.close()


def test_deleted_file_then_recreated(tmp_path: Path) -> None:
    path = tmp_path / "kern.log"
    path.write_text("a\n")
    source = FileSource(path, None, BOOT)
    assert _texts(source) == ["a"]
    path.unlink()
    assert source.wait(5.0) is True
    assert source.read_available() == []
    path.write_text("b\n")
    assert _texts(source) == ["b"]
    source.close()


def test_cursor_resume_and_from_start(tmp_path: Path) -> None:
    path = tmp_path / "kmsg"
    writer = KmsgFileWriter(path, BOOT)
    assert [writer.append(f"record {n}") for n in range(5)] == [0, 1, 2, 3, 4]

    resumed = FileSource(path, KernelLogCursor(BOOT, 2), BOOT)
    assert [r.seq for r in resumed.read_available()] == [3, 4]
    writer.append("record 5")
    assert [r.seq for r in resumed.read_available()] == [5]
    resumed.close()

    other_boot = FileSource(path, KernelLogCursor("another-boot", 4), BOOT)
    assert [r.seq for r in other_boot.read_available()] == [0, 1, 2, 3, 4, 5]
    other_boot.close()

    only_new = FileSource(path, None, BOOT, from_start=False)
    assert only_new.read_available() == []
    writer.append("record 6")
    assert [r.seq for r in only_new.read_available()] == [6]
    only_new.close()


def test_plain_text_and_kmsg_continuation_lines(tmp_path: Path) -> None:
    plain = FileSource(DATA / "dmesg.log", None, BOOT)
    records = plain.read_available()
    expected_lines = (DATA / "dmesg.log").read_text().splitlines()
    assert [r.text for r in records] == expected_lines
    assert {r.seq for r in records} == {None}
    plain.close()

    kmsg = FileSource(DATA / "kmsg.log", None, BOOT)
    records = kmsg.read_available()
    assert [r.seq for r in records] == [0, 1312, 1320, 1327, 1840, 1841, 1842, 1850, 1900]
    assert all(not r.text.startswith(" ") for r in records)
    kmsg.close()
    with pytest.raises(KernelLogUnavailable, match="closed"):
        kmsg.read_available()


def test_writer_continues_numbering_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "kmsg"
    clock = iter([1_000, 1_000, 500, 2_000]).__next__
    first = KmsgFileWriter(path, BOOT, clock_usec=clock)
    second = KmsgFileWriter(path, BOOT, clock_usec=clock)
    assert first.append("a") == 0
    assert second.append("b", prio=6) == 1
    assert first.append("c") == 2
    reopened = KmsgFileWriter(path, BOOT, clock_usec=clock)
    assert reopened.append("d\nnot a second line") == 3
    records = [parse_kmsg_record(line) for line in path.read_text().splitlines()]
    assert [(r.seq, r.timestamp_usec, r.text) for r in records if r is not None] == [
        (0, 1_000, "a"),
        (1, 1_001, "b"),  # usec never goes backwards or repeats
        (2, 1_002, "c"),
        (3, 2_000, "d\\x0anot a second line"),
    ]
    assert path.read_text().startswith("4,0,1000,-;a\n6,1,1001,-;b\n")
    with pytest.raises(ValueError, match="prio"):
        first.append("x", prio=-1)


def test_writer_mends_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "kmsg"
    path.write_text("4,0,10,-;whole\n4,1,20,-;to")
    # The torn record keeps its seq (a reader sees it once the newline arrives).
    assert KmsgFileWriter(path, BOOT, clock_usec=lambda: 5).append("next") == 2
    assert path.read_text().splitlines() == ["4,0,10,-;whole", "4,1,20,-;to", "4,2,21,-;next"]


def test_writer_finds_the_last_record_beyond_the_tail_probe(tmp_path: Path) -> None:
    path = tmp_path / "kmsg"
    path.write_text("4,41,10,-;record\n" + ("plain text without a record\n" * 4000))
    assert KmsgFileWriter(path, BOOT).append("next") == 42


_APPENDER = """
import sys
from hwcheck.kernellog.filelog import KmsgFileWriter
writer = KmsgFileWriter(sys.argv[1], "boot")
for n in range(int(sys.argv[3])):
    writer.append(f"{sys.argv[2]} {n}")
"""


def test_two_processes_appending_never_share_a_seq(tmp_path: Path) -> None:
    path = tmp_path / "kmsg"
    per_process = 60
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _APPENDER, str(path), name, str(per_process)],
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        for name in ("left", "right")
    ]
    assert [child.wait(timeout=60) for child in children] == [0, 0]
    lines = path.read_text().splitlines()
    records = [parse_kmsg_record(line) for line in lines]
    assert all(r is not None for r in records)
    seqs = [r.seq for r in records if r is not None]
    usecs = [r.timestamp_usec or 0 for r in records if r is not None]
    assert seqs == list(range(2 * per_process))
    assert all(later > earlier for earlier, later in itertools.pairwise(usecs))
    texts = {r.text for r in records if r is not None}
    assert texts == {f"{name} {n}" for name in ("left", "right") for n in range(per_process)}
