"""Several threads at once, and a writer killed with SIGKILL mid-stream."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import func, select

from daemon.store import Store, StoreError, XidRecord
from daemon.store.models import Event
from hwcheck.kernellog.records import KernelLogCursor
from hwcheck.model import CheckResult, Severity
from tests.support.store_rows import at, card, poll

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=5)

REPO = Path(__file__).resolve().parents[2]


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    """Poll ``condition`` until it holds or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.01)
    pytest.fail(f"timed out waiting for {what}")


def _xid_seqs(store: Store) -> list[int]:
    with store.read() as session:
        rows = session.execute(select(Event.kmsg_seq).where(Event.kind == "xid")).scalars()
        return sorted(int(seq) for seq in rows if seq is not None)


def test_threads_writing_at_once_never_see_database_is_locked(store: Store) -> None:
    writers, per_writer = 8, 40
    barrier = threading.Barrier(writers + 3)
    errors: list[BaseException] = []
    ids: list[int] = []
    ids_lock = threading.Lock()

    def guarded(work: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                barrier.wait()
                work()
            except BaseException as exc:  # collected and asserted below
                errors.append(exc)

        return run

    def write_events(n: int) -> Callable[[], None]:
        def work() -> None:
            for i in range(per_writer):
                new = store.record_event("operator", "info", f"writer {n} event {i}")
                with ids_lock:
                    ids.append(new)

        return work

    def write_polls() -> None:
        for second in range(per_writer):
            store.record_samples(poll(at(second), card(0), card(1)))

    def roll_and_read() -> None:
        for _ in range(10):
            store.rollup_and_prune(now=at(120))
            store.list_events(limit=50)

    def check_transitions() -> None:
        for i in range(per_writer):
            severity = Severity.WARNING if i % 2 else Severity.OK
            store.record_check_transitions([CheckResult("power_cap", 0, severity, "x")])

    threads = [threading.Thread(target=guarded(write_events(n))) for n in range(writers)]
    threads += [
        threading.Thread(target=guarded(write_polls)),
        threading.Thread(target=guarded(roll_and_read)),
        threading.Thread(target=guarded(check_transitions)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    assert len(ids) == len(set(ids)) == writers * per_writer
    assert len(store.list_events(kind="operator", limit=1000)) == writers * per_writer
    # ok, warning, ok, ... : every poll after the first is a transition.
    assert len(store.list_events(kind="check", limit=1000)) == per_writer - 1
    assert store.check_severities() == {"power_cap:0": "warning"}
    with store.read() as session:
        assert session.execute(select(func.count()).select_from(Event)).scalar_one() > 0


def test_sigkill_between_any_two_statements_neither_loses_nor_double_counts(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        for round_no in range(3):
            before = len(_xid_seqs(store))
            child = subprocess.Popen(
                [sys.executable, "-m", "tests.store.xid_writer", store_url, "boot-k", "1000000"],
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )

            def progressed(before: int = before, child: subprocess.Popen[bytes] = child) -> bool:
                if child.poll() is not None:
                    pytest.fail(
                        f"the writer exited early: {child.stderr.read() if child.stderr else ''!r}"
                    )
                return len(_xid_seqs(store)) >= before + 25

            try:
                _wait_for(progressed, f"the writer's progress (round {round_no})")
            finally:
                os.kill(child.pid, signal.SIGKILL)
                _, stderr = child.communicate(timeout=30)
            assert child.returncode == -signal.SIGKILL, stderr.decode(errors="replace")

            cursor = store.get_cursor()
            assert cursor is not None
            seqs = _xid_seqs(store)
            assert seqs == list(range(1, cursor.last_seq + 1))

        # A resumed follower that replays a few records it already handled stores only new ones.
        cursor = store.get_cursor()
        assert cursor is not None
        replayed = [
            store.record_xid_and_cursor(
                XidRecord(ts=at(0), xid=31, message="replay", boot_id="boot-k", kmsg_seq=seq),
                KernelLogCursor("boot-k", seq),
            )
            for seq in range(cursor.last_seq - 3, cursor.last_seq + 4)
        ]
        assert replayed == [False] * 4 + [True] * 3
        assert _xid_seqs(store) == list(range(1, cursor.last_seq + 4))
    finally:
        store.close()


def test_a_sqlite_url_timeout_bounds_the_wait_for_a_lock_held_elsewhere(tmp_path: Path) -> None:
    """``?timeout=S`` is the busy timeout: a writer gives up after S s, not the default 30."""
    path = tmp_path / "fleet.db"
    store = Store.open(f"sqlite:///{path}?timeout=0.3")
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        started_s = time.monotonic()
        with pytest.raises(StoreError, match="database is locked"):
            store.record_event("daemon", "info", "blocked", ts=at(0))
        waited_s = time.monotonic() - started_s
        holder.execute("ROLLBACK")
        assert 0.25 <= waited_s < 10, waited_s
        store.record_event("daemon", "info", "after the lock", ts=at(1))
        assert [row.message for row in store.list_events()] == ["after the lock"]
    finally:
        holder.close()
        store.close()


@pytest.mark.parametrize("timeout", ["soon", "-1", "nan"])
def test_a_sqlite_url_timeout_that_is_not_seconds_is_refused(tmp_path: Path, timeout: str) -> None:
    with pytest.raises(StoreError, match=f"timeout={timeout} in the URL must be a number"):
        Store.open(f"sqlite:///{tmp_path / 'fleet.db'}?timeout={timeout}")
