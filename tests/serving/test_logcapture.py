"""The engine log capture, on real files written the way the engine writes them."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from serving.runtime.logcapture import LogCapture, launch_marker
from tests.support.waiting import wait_until


def append(path: Path, data: bytes) -> None:
    """Write like the engine does: an O_APPEND descriptor of its own."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "engine.log"


@pytest.fixture
def capture(log_path: Path) -> Iterator[LogCapture]:
    cap = LogCapture(log_path, max_bytes=1024 * 1024, tail_lines=100, poll_interval_s=0.05)
    yield cap
    cap.close()


def test_missing_file_reads_as_empty(capture: LogCapture) -> None:
    assert capture.poll() == 0
    assert capture.tail(10) == []
    assert capture.last_line is None


def test_lines_arrive_in_order_and_partial_lines_wait(capture: LogCapture, log_path: Path) -> None:
    append(log_path, b"first\nsecond\nthi")
    assert capture.poll() == 2
    assert capture.tail(10) == ["first", "second"]
    assert capture.last_line == "thi"  # shown as progress, not yet a line
    append(log_path, b"rd\n")
    capture.poll()
    assert capture.tail(2) == ["second", "third"]
    assert capture.tail(0) == []


def test_progress_bar_carriage_returns_split_lines(capture: LogCapture, log_path: Path) -> None:
    append(log_path, b"Loading shards:  10%\rLoading shards:  50%\r")
    capture.poll()
    # The trailing "\r" may be half of "\r\n": the 50% update waits, shown as progress.
    assert capture.tail(5) == ["Loading shards:  10%"]
    assert capture.last_line == "Loading shards:  50%"
    append(log_path, b"\nLoading shards: 100%\r\nready\n")
    capture.poll()
    assert capture.tail(5) == [
        "Loading shards:  10%",
        "Loading shards:  50%",
        "Loading shards: 100%",
        "ready",
    ]


def test_tail_is_bounded(log_path: Path) -> None:
    cap = LogCapture(log_path, tail_lines=3)
    append(log_path, b"".join(f"line {i}\n".encode() for i in range(10)))
    cap.poll()
    assert cap.tail(100) == ["line 7", "line 8", "line 9"]


def test_rotation_copies_then_truncates_and_keeps_backups(log_path: Path) -> None:
    cap = LogCapture(log_path, max_bytes=200, backups=2, tail_lines=1000)
    for round_number in range(3):
        append(log_path, b"".join(f"r{round_number} line {i:03d}\n".encode() for i in range(20)))
        cap.poll()
        assert log_path.stat().st_size == 0
    first = log_path.with_name("engine.log.1").read_text()
    second = log_path.with_name("engine.log.2").read_text()
    assert first.startswith("r2 line 000")
    assert second.startswith("r1 line 000")
    assert not log_path.with_name("engine.log.3").exists()
    # Nothing read was lost from the in-memory tail across the rotations.
    assert len(cap.tail(1000)) == 60
    # The writer's O_APPEND descriptor carries on from the new end of file.
    append(log_path, b"after rotation\n")
    cap.poll()
    assert cap.tail(1) == ["after rotation"]


def test_external_truncation_restarts_from_the_beginning(
    capture: LogCapture, log_path: Path
) -> None:
    append(log_path, b"old line one\nold line two\n")
    capture.poll()
    os.truncate(log_path, 0)
    append(log_path, b"new\n")
    capture.poll()
    assert capture.tail(1) == ["new"]


def test_history_is_loaded_and_the_session_starts_at_the_last_launch(log_path: Path) -> None:
    marker_one = launch_marker(datetime(2026, 9, 29, tzinfo=UTC), ("vllm", "serve", "a"))
    marker_two = launch_marker(datetime(2026, 9, 30, tzinfo=UTC), ("vllm", "serve", "b"))
    append(
        log_path,
        f"{marker_one}\nRuntimeError: CUDA error: an illegal memory access\n{marker_two}\nloading\n".encode(),
    )
    cap = LogCapture(log_path)
    cap.open()
    try:
        assert cap.tail(10)[-1] == "loading"
        assert cap.session_tail(10) == [marker_two, "loading"]
        cap.begin_session()
        append(log_path, b"after\n")
        cap.poll()
        assert cap.session_tail(10) == ["after"]
    finally:
        cap.close()


def test_followers_get_backlog_then_new_lines(capture: LogCapture, log_path: Path) -> None:
    append(log_path, b"one\ntwo\n")
    capture.poll()
    with capture.subscribe(backlog=1) as subscription:
        assert subscription.get(timeout_s=1) == "two"
        append(log_path, b"three\n")
        capture.poll()
        assert subscription.get(timeout_s=1) == "three"
        assert subscription.get(timeout_s=0.01) is None


def test_slow_follower_drops_instead_of_blocking(capture: LogCapture, log_path: Path) -> None:
    subscription = capture.subscribe(max_queued=2)
    append(log_path, b"a\nb\nc\nd\n")
    capture.poll()
    assert subscription.dropped == 2
    assert [subscription.get(0.1), subscription.get(0.1)] == ["a", "b"]
    subscription.close()
    subscription.close()  # closing twice is harmless


def test_follow_iterates_live_lines_from_the_reader_thread(
    capture: LogCapture, log_path: Path
) -> None:
    append(log_path, b"first\n")
    capture.open()
    stop = threading.Event()
    seen: list[str] = []

    def reader() -> None:
        for line in capture.follow(stop.is_set, backlog=1, wake_s=0.02):
            seen.append(line)
            if line == "last":
                stop.set()

    thread = threading.Thread(target=reader)
    thread.start()
    # The backlog line proves the follower is subscribed; "last" then reaches it through
    # the capture's own reader thread (no explicit poll here).
    wait_until(lambda: seen == ["first"], 5, "the backlog line")
    append(log_path, b"last\n")
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert seen == ["first", "last"]


def test_bad_settings_are_refused(log_path: Path) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        LogCapture(log_path, max_bytes=0)


def test_undecodable_bytes_are_replaced_not_fatal(capture: LogCapture, log_path: Path) -> None:
    append(log_path, b"bad \xff\xfe byte\n")
    capture.poll()
    assert capture.tail(1) == ["bad \ufffd\ufffd byte"]
