"""Kernel time kept (issue 22, point 6): an Xid's own time, and when the follower stopped.

In-process: the real Xid path over a real SQLite store; the kernel clock is the one
boundary faked (the host's monotonic clock), and a real second connection holds the
store's write lock.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from daemon.rig.monitor import RigMonitor
from daemon.rig.xidpath import FollowerThread, XidPath
from daemon.store import Store
from daemon.store.xids import kernel_time_of
from hwcheck.checks import kernel_log as kernel_log_check
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.follower import XidFollower
from hwcheck.kernellog.kernel_time import kernel_wall_time
from hwcheck.kernellog.records import KernelRecord
from hwcheck.model import EventKind
from tests.support.xid_path import BOOT, XID_TEXT, ReplayingSource, scripted_host

NOW = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("usec", "monotonic_now_s", "expected"),
    [
        (40_000_000, 100.0, NOW - timedelta(seconds=60)),
        (100_000_000, 100.0, NOW),
        (100_500_000, 100.0, NOW),  # ahead of the clock: now, never the future
        (1, 0.5, NOW - timedelta(seconds=0.499999)),
        (None, 100.0, None),  # a plain-text log line has no stamp
        (-5, 100.0, None),
    ],
)
def test_a_stamp_maps_to_wall_time_at_read(
    usec: int | None, monotonic_now_s: float, expected: datetime | None
) -> None:
    assert kernel_wall_time(usec, monotonic_now_s, NOW) == expected


def test_an_xid_carries_the_kernels_time_beside_when_it_was_stored(tmp_path: Path) -> None:
    record = KernelRecord(text=XID_TEXT, seq=7, boot_id=BOOT, timestamp_usec=40_000_000)
    store = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    try:
        path = XidPath(store, RigMonitor(BOOT, 3), lambda _pci: 1, kernel_clock_s=lambda: 100.0)
        read_at = datetime.now(UTC)
        XidFollower(
            ReplayingSource([record]), XidCatalogue(), path.handle, threading.Event()
        ).drain()
        [event] = store.list_events(kind="xid")
        kernel = datetime.fromisoformat(kernel_time_of(event)["ts_kernel"])
        # Printed 60 s before it was read (the blind spell), stored just now.
        assert abs((read_at - kernel).total_seconds() - 60) < 2
        assert (event.ts - kernel).total_seconds() > 58
        assert kernel_time_of(replace(event, kind=EventKind.DAEMON)) == {}  # Xids only
    finally:
        store.close()


def test_down_since_is_when_the_follower_stopped_not_when_the_write_gave_up(
    tmp_path: Path,
) -> None:
    db = tmp_path / "fleet.db"
    store = Store.open(f"sqlite:///{db}?timeout=1")  # a write waits 1 s for the lock
    record = KernelRecord(text=XID_TEXT, seq=3, boot_id=BOOT, timestamp_usec=1)
    host, _ = scripted_host(tmp_path, [])
    host = replace(host, open_kernel_log=lambda _cursor: ReplayingSource([record]))
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    follower = FollowerThread(
        host,
        XidCatalogue(),
        store,
        XidPath(store, RigMonitor(BOOT, 3), lambda _pci: 1),
        backoff_base_s=30.0,
    )
    try:
        follower.start()  # the first read: the write waits 1 s, then fails
        down_for_s = follower.health.down_for_s()
        assert down_for_s is not None and down_for_s >= 0.9
        assert "database is locked" in kernel_log_check.judge(follower.health.reading()).message
    finally:
        holder.rollback()
        holder.close()
        follower.stop(1)
        store.close()
