"""The charts' time-axis markers, picked from a real store's events as fleetd writes them.

Real store (SQLite); the latch's event comes from recovery's audit trail (``StoreAudit``)
and the reboot's from the store's own boot tracking, exactly as in a running fleetd.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from daemon.ports.parts import StoreAudit
from daemon.rig.chart_markers import chart_markers
from daemon.rig.history import history_document
from daemon.store import Store
from hwcheck.model import EventKind, Severity

T0 = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    yield opened
    opened.close()


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_xids_latches_and_reboots_are_marked_oldest_first(store: Store) -> None:
    store.record_boot("boot-a", now=at(0))
    store.record_event(
        EventKind.XID, Severity.CRITICAL, "Xid 31 on card 1", 1, xid=31, ts=at(-30)
    )  # before the window
    store.record_event(EventKind.XID, Severity.CRITICAL, "Xid 31 on card 1", 1, xid=31, ts=at(5))
    StoreAudit(store, dry_run=False).record(
        "recovery", "stop_and_latch", "Xid 31 on card 1", "engine stopped, latch set"
    )
    StoreAudit(store, dry_run=True).record(
        "recovery", "stop_and_latch", "Xid 79 on card 2", "dry run: would stop and latch"
    )
    store.record_event(EventKind.RECOVERY, Severity.INFO, "power cap 180 W applied", 0, ts=at(6))
    store.record_event(EventKind.DAEMON, Severity.INFO, "fleetd started", ts=at(7))
    store.record_boot("boot-b", now=at(9))  # the reboot, and the latch clearing beside it

    now = datetime.now(UTC)
    found = chart_markers(store, at(-1), now + timedelta(seconds=1))

    assert [(m["kind"], m["label"]) for m in found] == [
        ("xid", "Xid 31"),
        ("reboot", "reboot"),
        ("latch", "latch"),  # the audit row is written now, after the simulated times
    ]
    xid, reboot, latch = found
    assert xid == {
        "ts_s": at(5).timestamp(),
        "kind": "xid",
        "label": "Xid 31",
        "title": "Xid 31 on card 1",
        "card": 1,
    }
    assert reboot["ts_s"] == at(9).timestamp()
    assert "boot-a -> boot-b" in reboot["title"]
    assert latch["title"].startswith("stop and latch: Xid 31 on card 1")
    assert chart_markers(store, at(-1), at(4)) == []


def test_the_history_document_carries_the_markers(store: Store) -> None:
    store.record_event(EventKind.XID, Severity.CRITICAL, "Xid 79 on card 2", 2, xid=79)
    history = history_document(store, [], "1h")
    assert [(m["kind"], m["label"], m["card"]) for m in history["markers"]] == [
        ("xid", "Xid 79", 2)
    ]
