"""A connection SQLite opened read-only never writes again: the store drops its pool.

SQLite falls back to a read-only open when the disk refuses a read-write one (a state dir
on a filesystem remounted read-only after an error). Once the owner makes it writable
again, such a pooled connection would fail every write until fleetd restarts. Here a
pooled connection is made read-only the way SQLite reports it (``PRAGMA query_only``:
"attempt to write a readonly database"); the write that meets it fails, the pool is
dropped, and the next write goes through on a fresh connection.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from daemon.store import Store, StoreError
from hwcheck.model import EventKind, Severity


def test_a_write_on_a_read_only_connection_drops_the_pool(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    try:
        store.record_event(EventKind.DAEMON, Severity.INFO, "before")
        with store.read() as session:  # the pool's connection, read-only from now on
            session.execute(text("PRAGMA query_only = ON"))
        with pytest.raises(StoreError, match="readonly database"):
            store.record_event(EventKind.DAEMON, Severity.INFO, "on the read-only connection")
        store.record_event(EventKind.DAEMON, Severity.INFO, "after")
        messages = [event.message for event in store.list_events(limit=10)]
        assert "after" in messages and "before" in messages
        assert "on the read-only connection" not in messages
    finally:
        store.close()


def test_a_connection_checked_out_when_the_pool_drops_is_closed_when_it_comes_back(
    tmp_path: Path,
) -> None:
    """Another thread's connection (checked out at the drop) must not outlive it.

    Every connection of a process to one SQLite file shares its ``-shm`` mapping: one
    read-only connection left open keeps the fresh ones failing. ``Engine.dispose`` alone
    leaves a checked-out connection open in the dropped pool once it is returned.
    """
    store = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    try:
        store.record_event(EventKind.DAEMON, Severity.INFO, "before")
        with store.read() as elsewhere:  # checked out by "another thread" across the drop
            raw = elsewhere.connection().connection.dbapi_connection
            assert raw is not None
            raw.execute("SELECT 1")
            with store.read() as session:
                session.execute(text("PRAGMA query_only = ON"))
            with pytest.raises(StoreError, match="readonly database"):
                store.record_event(EventKind.DAEMON, Severity.INFO, "on the read-only one")
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            raw.execute("SELECT 1")
        store.record_event(EventKind.DAEMON, Severity.INFO, "after")
    finally:
        store.close()


def test_no_connection_is_opened_while_the_mount_is_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only open would keep the shared ``-shm`` read-only after the remount: refused.

    The mount's flag is faked (``os.statvfs``: root and a bind mount make it real in
    ``tests/daemon/store/test_store_faults.py``); the store, SQLite and its pool are real.
    """
    import os

    from daemon.store import db

    store = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    real_statvfs = os.statvfs
    opened: list[object] = []

    class ReadOnlyMount:
        def __init__(self, found: os.statvfs_result) -> None:
            self.f_flag = found.f_flag | os.ST_RDONLY

    def statvfs(path: object) -> object:
        found = real_statvfs(path)  # type: ignore[arg-type]
        return ReadOnlyMount(found) if Path(str(path)) == tmp_path else found

    try:
        store.record_event(EventKind.DAEMON, Severity.INFO, "before")
        store.close()  # the pool's connections go: the next unit must open one
        monkeypatch.setattr(db.os, "statvfs", statvfs)
        monkeypatch.setattr(db.sqlite3, "connect", lambda *a, **k: opened.append(a))
        with pytest.raises(StoreError, match=f"readonly database: {tmp_path} is mounted read-only"):
            store.record_event(EventKind.DAEMON, Severity.INFO, "while read-only")
        assert opened == []  # SQLite never saw an open: nothing read-only to outlive the spell
        monkeypatch.undo()
        store.record_event(EventKind.DAEMON, Severity.INFO, "after the remount")
        messages = [event.message for event in store.list_events(limit=10)]
        assert "after the remount" in messages and "while read-only" not in messages
    finally:
        store.close()
