"""A connection SQLite opened read-only never writes again: the store drops its pool.

SQLite falls back to a read-only open when the disk refuses a read-write one (a state dir
on a filesystem remounted read-only after an error). Once the owner makes it writable
again, such a pooled connection would fail every write until fleetd restarts. Here a
pooled connection is made read-only the way SQLite reports it (``PRAGMA query_only``:
"attempt to write a readonly database"); the write that meets it fails, the pool is
dropped, and the next write goes through on a fresh connection.
"""

from __future__ import annotations

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
