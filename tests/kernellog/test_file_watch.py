"""FileSource waits on inotify: a change wakes it at once, and it never polls meanwhile.

Real inotify on a temp folder (this machine's kernel); a writer thread changes the file
while ``wait`` blocks. ``time.sleep`` is made to fail: the watched path must not poll.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hwcheck.kernellog import filelog
from hwcheck.kernellog.file_watch import open_watch
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
    """The source then polls (``alive`` False): a folder made again is not watched."""
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
