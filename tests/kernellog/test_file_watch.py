"""FileSource waits on inotify: a change wakes it at once, and it never polls meanwhile.

Real inotify on a temp folder (this machine's kernel); a writer thread changes the file
while ``wait`` blocks. ``time.sleep`` is made to fail: the watched path must not poll.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hwcheck.kernellog import file_watch, filelog
from hwcheck.kernellog.file_watch import FileWatch, open_watch
from hwcheck.kernellog.filelog import FileSource

BOOT = "8b3f5c1e-2d4a-4f6b-9c8d-7e6f5a4b3c2d"
# Far longer than a wake-up takes: a wait that returns True before it ran out was woken.
WAIT_S = 30.0


@pytest.fixture(autouse=True)
def no_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(_seconds: float) -> None:
        raise AssertionError("a watched file was polled")

    monkeypatch.setattr(filelog.time, "sleep", refuse)


@pytest.fixture
def later() -> Iterator[Callable[[Callable[[], object]], None]]:
    """Run a change on another thread a moment after ``wait`` has begun blocking."""
    threads: list[threading.Thread] = []

    def run(change: Callable[[], object]) -> None:
        def body() -> None:
            threading.Event().wait(0.2)  # a pause (time.sleep refuses here): wait blocks first
            change()

        thread = threading.Thread(target=body, daemon=True)
        threads.append(thread)
        thread.start()

    yield run
    for thread in threads:
        thread.join(WAIT_S)


def _texts(source: FileSource) -> list[str]:
    return [record.text for record in source.read_available()]


def _woken_until_read(source: FileSource) -> list[str]:
    """Wait (each time woken, never timed out) until a line is read.

    A create or a rename wakes the wait before the writer's line is in the file: the line
    then comes with the next event.
    """
    seen: list[str] = []
    while not seen:
        assert source.wait(WAIT_S) is True
        seen += _texts(source)
    return seen


def test_an_append_wakes_the_wait(tmp_path: Path, later: Callable[..., None]) -> None:
    path = tmp_path / "kern.log"
    path.write_text("a\n")
    source = FileSource(path, None, BOOT)
    assert _texts(source) == ["a"]

    def append() -> None:
        with path.open("a") as out:
            out.write("b\n")

    later(append)
    assert source.wait(WAIT_S) is True
    assert _texts(source) == ["b"]
    source.close()


def test_a_file_that_appears_or_is_replaced_wakes_it(
    tmp_path: Path, later: Callable[..., None]
) -> None:
    path = tmp_path / "kern.log"
    source = FileSource(path, None, BOOT, from_start=False)
    assert source.read_available() == []
    later(lambda: path.write_text("first\n"))
    assert _woken_until_read(source) == ["first"]

    def rotate() -> None:
        path.rename(tmp_path / "kern.log.1")
        path.write_text("new\n")

    later(rotate)
    assert _woken_until_read(source) == ["new"]
    source.close()


def test_other_files_in_the_folder_do_not_count(tmp_path: Path) -> None:
    path = tmp_path / "kern.log"
    path.write_text("a\n")
    watch = open_watch(path)
    assert watch is not None
    (tmp_path / "syslog").write_text("noise\n")
    assert watch.wait(0.2) is False
    path.write_text("a\nb\n")
    assert watch.wait(WAIT_S) is True
    watch.close()
    watch.close()  # twice is fine


def test_a_deleted_folder_wakes_and_ends_the_watch(tmp_path: Path) -> None:
    """``alive`` turns False, which sends ``FileSource.wait`` back to polling."""
    folder = tmp_path / "log"
    folder.mkdir()
    path = folder / "kern.log"
    path.write_text("a\n")
    watch = open_watch(path)
    assert watch is not None
    path.unlink()
    folder.rmdir()
    assert watch.wait(WAIT_S) is True
    assert watch.alive is False
    watch.close()


def test_no_folder_no_watch(tmp_path: Path) -> None:
    assert open_watch(tmp_path / "missing" / "kern.log") is None


def _fed_watch(*events: tuple[int, bytes]) -> FileWatch:
    """A watch reading crafted ``inotify_event`` records from a pipe (the kernel's layout)."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    for mask, name in events:
        padded = name + b"\0" * (16 - len(name) % 16) if name else b""
        os.write(write_end, struct.pack("iIII", 1, mask, 0, len(padded)) + padded)
    os.close(write_end)
    return FileWatch(read_end, b"kern.log")


def test_the_events_are_read_as_the_kernel_lays_them_out() -> None:
    other = _fed_watch((file_watch.IN_MODIFY, b"syslog"), (file_watch.IN_CREATE, b"kern.log.1"))
    assert other.wait(0) is False and other.alive
    ours = _fed_watch((file_watch.IN_MODIFY, b"syslog"), (file_watch.IN_MODIFY, b"kern.log"))
    assert ours.wait(0) is True and ours.alive
    # The queue overflowed: the file's event may be among those dropped, so look.
    overflow = _fed_watch((file_watch.IN_Q_OVERFLOW, b""))
    assert overflow.wait(0) is True and overflow.alive
    gone = _fed_watch((file_watch.IN_IGNORED, b""))
    assert gone.wait(0) is True and not gone.alive
    for watch in (other, ours, overflow, gone):
        watch.close()
