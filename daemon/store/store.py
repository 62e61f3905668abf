"""``Store``: the daemon's one handle on its history, safe to share between threads.

The class only composes: each query module adds its methods as a mixin over
``db.Database`` (which owns the connection and the units of work), so a new query is
written once, in the module of the record it reads or writes. Methods that must be
atomic together (an Xid and the kernel-log cursor past it; check states and their
transition events; clearing the latch and its event) are single methods for that reason.
The functions that take a ``Session`` (``events.insert_event``, ``keyvalue.set_value``...)
are how store modules share one transaction; everything outside the store uses ``Store``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from daemon.store.alerts import AlertQueries
from daemon.store.audit import AuditQueries
from daemon.store.bench import BenchQueries
from daemon.store.builds import BuildQueries
from daemon.store.canaries import CanaryQueries
from daemon.store.db import (
    StoreError,
    build_engines,
    mask_url,
    one_line_cause,
    retire_connections,
)
from daemon.store.events import EventQueries
from daemon.store.file_guard import FileGuard, damaged_message, quick_check
from daemon.store.keyvalue import KeyValueQueries
from daemon.store.launches import LaunchQueries
from daemon.store.memtests import MemtestQueries
from daemon.store.migrations import schema_version, upgrade
from daemon.store.outbox import OutboxQueries
from daemon.store.passports import PassportQueries
from daemon.store.rollups import RollupQueries
from daemon.store.samples import SampleQueries
from daemon.store.xids import XidQueries
from hwcheck.model import EventKind, Severity

log = logging.getLogger("fleetd.store")


def sqlite_file(engine: Engine) -> Path | None:
    """The file of a SQLite engine (None for other dialects and URI-style names)."""
    if engine.dialect.name != "sqlite":
        return None
    database = engine.url.database or ""
    if not database or database.startswith("file:"):
        return None
    return Path(database).expanduser()


def _migrate(engine: Engine, masked: str) -> None:
    """Upgrade the schema; a failure is one ``StoreError`` naming the database."""
    try:
        upgrade(engine)
    except StoreError as exc:
        engine.dispose()
        raise StoreError(f"store {masked}: {exc}") from None
    except SQLAlchemyError as exc:
        engine.dispose()
        raise StoreError(f"store {masked}: {one_line_cause(exc)}") from None


class Store(
    EventQueries,
    XidQueries,
    SampleQueries,
    RollupQueries,
    LaunchQueries,
    AuditQueries,
    KeyValueQueries,
    AlertQueries,
    OutboxQueries,
    CanaryQueries,
    MemtestQueries,
    BuildQueries,
    PassportQueries,
    BenchQueries,
):
    """Events, samples, rollups, latch, launches, audit and alerts in one SQL database."""

    @classmethod
    def open(cls, url: str) -> Store:
        """Connect to ``url``, upgrade its schema to the newest, and return the store.

        A SQLite file is integrity-checked read-only first (a damaged one is never
        written, not even by the migrations) and then watched by inode (``file_guard``).
        """
        masked = mask_url(url)
        try:
            engines = build_engines(url)
        except StoreError as exc:
            raise StoreError(f"store {masked}: {exc}") from None
        path = sqlite_file(engines.read)
        if path is not None and (why := quick_check(path)) is not None:
            engines.read.dispose()
            raise StoreError(f"store {masked}: {damaged_message(path, why)}")
        _migrate(engines.write, masked)
        store = cls(engines.read, engines.write, url)
        if path is not None:
            store.watch_file(path)
        return store

    def __init__(self, read_engine: Engine, write_engine: Engine, url: str) -> None:
        """Use ``Store.open``; this wires already-migrated engines."""
        super().__init__(read_engine, write_engine, url)
        self._fresh_listeners: list[Callable[[], None]] = []

    def add_fresh_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` when the file under the store was started afresh or replaced.

        What fleetd keeps about its history in memory must then be written again (this
        boot's Xids from the kernel log, the latch waiver, the running launch): the new
        file holds none of it. Called in the thread whose write noticed it: be quick.
        """
        self._fresh_listeners.append(listener)

    def watch_file(self, path: Path) -> None:
        """Check ``path``'s inode before every write: a deleted or replaced file is noticed."""
        guard = FileGuard(path, partial(retire_connections, self._read_engine), self._migrate_again)

        def before_write() -> None:
            guard.before_write()
            notes = guard.take_notes()
            if not notes:
                return
            self._cards.clear()  # rows of the old file: writing their ids fails the keys
            for note in notes:  # the reopened store's first record says why
                self.record_event(EventKind.DAEMON, Severity.WARNING, note)
            for listener in self._fresh_listeners:
                try:
                    listener()
                except Exception:
                    log.exception("a listener of the fresh store failed")

        self._before_write = before_write

    def _migrate_again(self) -> None:
        """The schema on the file now at the store's path (a new or a replaced one)."""
        _migrate(self._write_engine, self.url)

    def schema_version(self) -> int:
        """The database's schema version."""
        with self.read() as session:
            return schema_version(session.connection())
