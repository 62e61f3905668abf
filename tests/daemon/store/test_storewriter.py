"""StoreWriter: bounded while the store is down, and its reading feeds the ``store`` check."""

from __future__ import annotations

import threading

import pytest

from daemon.store import StoreError
from daemon.store.writer import StoreWriter, store_remedy
from hwcheck.checks import store as store_check
from hwcheck.model import CheckResult, Severity


def health(writer: StoreWriter) -> CheckResult:
    """The ``store`` check on the writer's reading now (what each poll judges)."""
    return store_check.judge(writer.reading())


def test_a_stuck_write_is_critical_and_the_queue_stays_bounded() -> None:
    now_s = [100.0]
    gate = threading.Event()
    started = threading.Event()
    writer = StoreWriter("free disk", stuck_after_s=5.0, max_pending=3, clock=lambda: now_s[0])
    ran: list[int] = []

    def blocked() -> None:
        started.set()
        gate.wait(10)

    writer.submit(blocked)
    assert started.wait(5)
    for number in range(10):
        writer.submit(lambda number=number: ran.append(number))
    assert health(writer).severity is Severity.OK, "a write is not stuck before 5 s"
    now_s[0] += 6.0
    stuck = health(writer)
    assert stuck.severity is Severity.CRITICAL
    assert stuck.message.startswith("a store write has waited 6 s")
    assert "7 poll(s) not stored" in stuck.message
    assert stuck.remedy == "free disk"
    gate.set()
    assert writer.flush(5)
    assert ran == [7, 8, 9], "the newest jobs are kept"
    assert health(writer).severity is Severity.OK
    assert writer.recovered() == 7
    writer.close(1)


def test_a_failing_write_is_critical_until_one_succeeds() -> None:
    writer = StoreWriter("free disk", stuck_after_s=5.0)

    def full() -> None:
        raise StoreError("sqlite:///x.db: database or disk is full")

    writer.submit(full)
    assert writer.flush(5)
    failing = health(writer)
    assert failing.severity is Severity.CRITICAL
    assert "database or disk is full" in failing.message
    writer.submit(lambda: None)  # a read (the default): it works on a full disk too
    assert writer.flush(5)
    assert health(writer).severity is Severity.CRITICAL, "a read proves nothing"
    writer.submit(lambda: None, writes=True)
    assert writer.flush(5)
    assert health(writer).severity is Severity.OK
    writer.close(1)


def test_the_remedy_names_the_database_file() -> None:
    remedy = store_remedy("sqlite:////var/lib/cmpfleet/fleet.db")
    assert "df -h /var/lib/cmpfleet" in remedy
    assert "fuser -v /var/lib/cmpfleet/fleet.db" in remedy
    assert "s3cret" not in store_remedy("postgresql+psycopg://fleet:s3cret@db/fleet")


@pytest.mark.parametrize(
    ("error", "says"),
    [
        ("store sqlite:////s/fleet.db: database or disk is full", "free disk space where"),
        ("store sqlite:////s/fleet.db: database is locked", "stop the process that holds"),
        (
            "/s/fleet.db was deleted and cannot be created again: [Errno 13] Permission denied",
            "was deleted or replaced while fleetd ran",
        ),
        (
            "/s/fleet.db was replaced while fleetd ran by a file that failed its integrity check",
            "mv /s/fleet.db /s/fleet.db.bad",
        ),
    ],
)
def test_the_remedy_names_what_happened(error: str, says: str) -> None:
    """A deleted fleet.db once got "free disk space" (issue 33)."""
    writer = StoreWriter(lambda got: store_remedy("sqlite:////s/fleet.db", got), stuck_after_s=5)
    try:
        writer.record_failure(StoreError(error))
        result = health(writer)
        assert result.severity is Severity.CRITICAL
        assert says in (result.remedy or "")
    finally:
        writer.close(1)
