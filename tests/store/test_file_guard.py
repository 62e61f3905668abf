"""The store's file: never written when damaged, followed when deleted or replaced (issue 22).

Real SQLite files: a database whose last page is overwritten, one deleted under a running
store (with a second handle still reading it), one replaced by ``mv``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.store import Store, StoreError
from daemon.store.file_guard import quick_check
from hwcheck.model import EventKind, Severity
from tests.support.store_rows import at, card, poll

PAGE_BYTES = 4096


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "fleet.db"


@pytest.fixture
def store(db: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{db}")
    yield opened
    opened.close()


def messages(store: Store) -> list[str]:
    return [event.message for event in store.list_events(limit=100)]


def filled_db(db: Path) -> None:
    """A closed store with enough events that its last page is a table page."""
    store = Store.open(f"sqlite:///{db}")
    for number in range(400):
        store.record_event(EventKind.DAEMON, Severity.INFO, f"event {number} " + "x" * 100)
    store.close()
    assert not Path(f"{db}-wal").exists()  # checkpointed: every page is in the file


def test_a_database_with_a_corrupt_last_page_is_never_modified(db: Path) -> None:
    filled_db(db)
    size = db.stat().st_size
    with db.open("r+b") as raw:
        raw.seek(size - PAGE_BYTES)
        raw.write(b"\xa5" * PAGE_BYTES)
    before = db.read_bytes()
    mtime_ns = db.stat().st_mtime_ns
    with pytest.raises(StoreError) as caught:
        Store.open(f"sqlite:///{db}")
    message = str(caught.value)
    assert "\n" not in message
    assert f"{db} failed its integrity check" in message
    assert f"move it aside, e.g. mv {db} {db}.bad" in message
    assert db.read_bytes() == before and db.stat().st_mtime_ns == mtime_ns
    assert sorted(p.name for p in db.parent.iterdir()) == ["fleet.db"]


def test_a_sound_or_missing_file_passes_the_check(db: Path) -> None:
    assert quick_check(db) is None
    filled_db(db)
    assert quick_check(db) is None


def test_a_deleted_file_is_noticed_and_writes_go_to_a_fresh_one(store: Store, db: Path) -> None:
    store.record_event(EventKind.DAEMON, Severity.INFO, "before")
    old_inode = db.stat().st_ino
    reader = sqlite3.connect(db)  # the deleted file stays readable through this handle
    try:
        assert reader.execute("SELECT count(*) FROM events").fetchone()[0] >= 1
        db.unlink()
        store.record_event(EventKind.DAEMON, Severity.INFO, "after")
        assert db.stat().st_ino != old_inode
        assert db.stat().st_mode & 0o777 == 0o600
        # The new file holds the notice and what came after; the old one never got "after".
        listed = messages(store)
        assert "after" in listed and "before" not in listed
        assert any("fleet.db was deleted while fleetd ran" in m for m in listed)
        old = [row[0] for row in reader.execute("SELECT message FROM events")]
        assert "before" in old and "after" not in old
    finally:
        reader.close()


def test_a_replaced_sound_file_is_used(store: Store, db: Path, tmp_path: Path) -> None:
    other = tmp_path / "restored.db"
    filled_db(other)
    store.record_event(EventKind.DAEMON, Severity.INFO, "on the old file")
    os.replace(other, db)
    store.record_event(EventKind.DAEMON, Severity.INFO, "on the new file")
    listed = messages(store)
    assert "on the new file" in listed and "on the old file" not in listed
    assert "event 399 " + "x" * 100 in listed
    assert any("was replaced while fleetd ran" in m for m in listed)


def test_a_replaced_damaged_file_is_never_written(store: Store, db: Path, tmp_path: Path) -> None:
    junk = tmp_path / "junk"
    junk.write_bytes(bytes(range(256)) * 64)
    os.replace(junk, db)
    before = db.read_bytes()
    for _ in range(2):  # every write says so, in one line
        with pytest.raises(StoreError) as caught:
            store.record_event(EventKind.DAEMON, Severity.INFO, "lost")
        message = str(caught.value)
        assert "\n" not in message
        assert "was replaced while fleetd ran by a file that failed its integrity check" in message
        assert f"mv {db} {db}.bad" in message
    assert db.read_bytes() == before
    db.unlink()  # the person moved it aside: a fresh history, writes work again
    store.record_event(EventKind.DAEMON, Severity.INFO, "back")
    assert "back" in messages(store)


def test_after_a_delete_the_next_writes_need_no_row_of_the_old_file(store: Store, db: Path) -> None:
    """Samples name their card's row: the first poll after the delete once failed its
    FOREIGN KEY (the cached card ids were the old file's), an outage of a poll (issue 33)."""
    fresh: list[str] = []
    store.add_fresh_listener(lambda: fresh.append("fresh"))
    store.record_samples(poll(at(0), card(0), card(1)))
    db.unlink()
    store.record_samples(poll(at(1), card(0), card(1)))  # no StoreError
    assert fresh == ["fresh"]  # told once, so fleetd writes its history again
    assert [row.index for row in store.list_cards()] == [0, 1]
    store.record_samples(poll(at(2), card(0), card(1)))
    assert fresh == ["fresh"]
