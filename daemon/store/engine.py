"""Build the SQLAlchemy engine: SQLite tuned for a long-running multi-threaded daemon.

SQLite runs in WAL mode (readers never block the writer), ``synchronous=NORMAL`` (a
commit is durable against a process crash; a power loss may lose the last commits but
never corrupts), a busy timeout, and foreign keys on. pysqlite's own implicit
transaction handling is switched off and every transaction is begun explicitly: reads
with a plain ``BEGIN``, writes with ``BEGIN IMMEDIATE`` so a writer queues on the busy
timeout up front instead of failing with "database is locked" when it tries to upgrade
a read lock that another writer got first.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import ConnectionPoolEntry

from daemon.store.errors import StoreError

SQLITE_BUSY_TIMEOUT_MS = 30_000
PG_CONNECT_TIMEOUT_S = 10
SQLITE_WAL_LIMIT_BYTES = 64 * 1024 * 1024
_BEGIN_OPTION = "cmpfleet_sqlite_begin"


@dataclass(frozen=True, slots=True)
class Engines:
    """The same pool seen twice: ``write`` begins IMMEDIATE on SQLite, ``read`` does not."""

    read: Engine
    write: Engine


def parse_url(url: str) -> URL:
    """Parse and vet ``url``; a bad one is a ``StoreError`` naming what is wrong."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"not a database URL: {exc}") from exc
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:") or database.startswith("file::memory:"):
            raise StoreError(
                "an in-memory SQLite database does not survive a restart: "
                "use sqlite:///path/to/fleet.db"
            )
        parent = Path(database).expanduser().parent
        if not parent.is_dir():
            raise StoreError(f"directory {parent} does not exist")
    return parsed


def _on_sqlite_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    """Per-connection settings; autocommit at the driver so we issue BEGIN ourselves."""
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        _ensure_wal(cursor)
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        # Checkpoints keep the WAL from growing; this also truncates the file afterwards.
        cursor.execute(f"PRAGMA journal_size_limit = {SQLITE_WAL_LIMIT_BYTES}")
    finally:
        cursor.close()


def _ensure_wal(cursor: Any) -> None:
    """Switch to WAL once (it persists in the file); retry while another opener holds it.

    Changing the journal mode needs an exclusive lock and SQLite may answer "database is
    locked" at once, without waiting out the busy timeout, when several processes open a
    brand-new database together: so the wait is ours, bounded by the same timeout.
    """
    if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    pause_s = 0.01
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(pause_s)
        pause_s = min(pause_s * 2, 0.5)


def _on_sqlite_begin(conn: Connection) -> None:
    mode = conn.get_execution_options().get(_BEGIN_OPTION, "DEFERRED")
    conn.exec_driver_sql(f"BEGIN {mode}")


def build_engines(url: str) -> Engines:
    """Create the engine for ``url`` (connects lazily; ``StoreError`` for a bad URL)."""
    parsed = parse_url(url)
    kwargs: dict[str, Any] = {"pool_pre_ping": parsed.get_backend_name() != "sqlite"}
    if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
        # An unreachable host must fail start-up in seconds, not after the TCP default.
        kwargs["connect_args"] = {"connect_timeout": PG_CONNECT_TIMEOUT_S}
    try:
        engine = create_engine(parsed, **kwargs)
    except (ArgumentError, NoSuchModuleError, ImportError) as exc:
        raise StoreError(f"cannot use this URL: {exc}") from exc
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _on_sqlite_connect)
        event.listen(engine, "begin", _on_sqlite_begin)
        return Engines(read=engine, write=engine.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"}))
    return Engines(read=engine, write=engine)
