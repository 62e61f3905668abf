"""The log-signature counter against a real engine log file, its capture and a real store.

Only lines the engine writes after the counter was built are counted (a restarted fleetd
reloads the hour's count instead of counting its history again), and every one of those:
fleetd builds the counter before it opens or starts the engine and starts it after, so a
line written in between must still count (a loaded machine lost one so).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from daemon.canaries.log_signatures import LogSignatureCounter
from daemon.store import Store
from serving.canary.signatures import SignatureTable, hour_of
from serving.runtime.logcapture import LogCapture
from tests.support.waiting import wait_until

TABLE = SignatureTable.build(rules=[("widget", "^WIDGET ", "warning")])


@pytest.fixture
def capture(tmp_path: Path) -> Iterator[LogCapture]:
    log = LogCapture(tmp_path / "engine.log", poll_interval_s=0.05)
    yield log
    log.close()


def _write(capture: LogCapture, *lines: str) -> None:
    with capture.path.open("a", encoding="utf-8") as handle:
        handle.writelines(line + "\n" for line in lines)


def _this_hour(counter: LogSignatureCounter) -> int:
    return next(e["this_hour"] for e in counter.entries() if e["name"] == "widget")


def test_a_line_written_before_the_counter_starts_is_counted(
    capture: LogCapture, store: Store
) -> None:
    capture.open()
    counter = LogSignatureCounter(TABLE, store, capture)
    _write(capture, "WIDGET printed while fleetd was still starting", "INFO ready")
    capture.poll()  # read (and handed to followers) before the counter's thread runs
    counter.start()
    try:
        wait_until(lambda: _this_hour(counter) == 1, 10, "the early line counted")
        _write(capture, "WIDGET a later one")
        wait_until(lambda: _this_hour(counter) == 2, 10, "the later line counted")
    finally:
        counter.stop()
    stored = store.log_signature_counts(hour_of(datetime.now(UTC)) - timedelta(hours=1))
    assert ("widget", 2) in [(name, count) for _, name, count in stored]


def test_the_history_a_restarted_fleetd_reads_is_not_counted_again(
    capture: LogCapture, store: Store
) -> None:
    _write(capture, "WIDGET counted by the fleetd before this one")
    counter = LogSignatureCounter(TABLE, store, capture)
    capture.open()  # loads the file's last lines as history
    counter.start()
    try:
        _write(capture, "WIDGET a new one")
        wait_until(lambda: _this_hour(counter) == 1, 10, "the new line counted")
        assert capture.poll() == 0 and _this_hour(counter) == 1
    finally:
        counter.stop()
