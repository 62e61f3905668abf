"""The database underneath the store: connection, dialect, column types and errors.

Everything the query modules share and nothing about any one record:

- ``StoreError`` (one line naming the database, password masked) and ``StoreInputError``;
- the engine: SQLite in WAL mode (readers never block the writer), ``synchronous=NORMAL``
  (a commit survives a process crash; a power loss may lose the last commits but never
  corrupts), a busy timeout, foreign keys on; pysqlite's implicit transactions are off and
  every transaction begins explicitly, writes with ``BEGIN IMMEDIATE`` so a writer queues
  on the busy timeout up front instead of failing to upgrade a read lock; PostgreSQL or
  any other SQLAlchemy URL as is;
- times stored as integer microseconds since the Unix epoch on every dialect (compact,
  exact, ordered; a minute bucket is integer division, so the rollup SQL is the same on
  SQLite and PostgreSQL), seen by Python as aware UTC datetimes;
- ``INSERT ... ON CONFLICT`` through each dialect's construct (a savepoint elsewhere);
- ``Database``, the units of work every query mixin of ``Store`` runs in.
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sqlalchemy import (
    Dialect,
    Engine,
    Table,
    create_engine,
    event,
    insert,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import (
    ArgumentError,
    IntegrityError,
    NoSuchModuleError,
    SQLAlchemyError,
    StatementError,
)
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

from serving.errors import Unavailable
from serving.recipe.masking import mask_url_passwords

# -- errors -------------------------------------------------------------------------


class StoreError(Unavailable):
    """The database could not be opened, upgraded, read or written.

    An ``Unavailable``: an API request that needs the store (the history, the events)
    answers 503 with this one line, while the status, ``/metrics`` and recovery go on
    from memory.
    """

    default_code = "store_unavailable"


class StoreInputError(ValueError):
    """A caller handed the store a value it cannot take (unknown kind, naive time...)."""


MAX_LIST_LIMIT = 10_000


def check_list_limit(limit: int) -> None:
    """Refuse a list size outside ``1..MAX_LIST_LIMIT`` with a one-line input error."""
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise StoreInputError(f"limit {limit} out of range: expected 1..{MAX_LIST_LIMIT}")


def mask_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (also for URLs that do not parse).

    SQLAlchemy hides only the ``user:PASSWORD@`` form; libpq also takes ``?password=``,
    which the recipe masking's rules cover with every other URL secret.
    """
    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        shown = url
    return mask_url_passwords(shown)


def one_line_cause(exc: BaseException) -> str:
    """The first meaningful line of a driver error (SQLAlchemy wraps it in ``.orig``)."""
    inner = getattr(exc, "orig", None) or exc
    text = str(inner).strip()
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if line:
            return line
    return type(inner).__name__


# -- column types ------------------------------------------------------------------

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
US_PER_S = 1_000_000
US_PER_MINUTE = 60 * US_PER_S


def to_epoch_us(value: datetime, what: str = "time") -> int:
    """Microseconds since the epoch for an aware datetime; a naive one is refused."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise StoreInputError(f"{what} {value.isoformat()} has no timezone: pass an aware UTC time")
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * US_PER_S + delta.microseconds


def from_epoch_us(value: int) -> datetime:
    """The aware UTC datetime for microseconds since the epoch."""
    return EPOCH + timedelta(microseconds=int(value))


def require_aware(value: datetime, what: str) -> datetime:
    """``value`` converted to UTC; a naive datetime is a clear input error."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise StoreInputError(f"{what} {value.isoformat()} has no timezone: pass an aware UTC time")
    return value.astimezone(UTC)


# Deterministic constraint and index names, identical in the models and the migrations
# (and so on every dialect), so a migrated database matches a model-built one exactly.
NAMING_CONVENTION: Mapping[str, str] = MappingProxyType(
    {
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


# -- the engine --------------------------------------------------------------------

SQLITE_BUSY_TIMEOUT_S = 30.0  # a SQLite URL's own ``?timeout=S`` (pysqlite's name) overrides it
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
        sqlite_busy_timeout_s(parsed)
    return parsed


def sqlite_busy_timeout_s(parsed: URL) -> float:
    """How long a SQLite writer waits for a lock held elsewhere before "database is locked".

    The URL's ``timeout`` query parameter, in seconds as pysqlite reads it
    (``sqlite:///fleet.db?timeout=5``), else 30 s: long enough for a backup or a person's
    ``sqlite3`` session, and short enough that a stuck lock shows in status.
    """
    raw = parsed.query.get("timeout")
    if raw is None:
        return SQLITE_BUSY_TIMEOUT_S
    text = raw[-1] if isinstance(raw, tuple) else raw
    try:
        timeout_s = float(text)
    except ValueError:
        timeout_s = -1.0
    if not (math.isfinite(timeout_s) and timeout_s >= 0):
        raise StoreError(f"timeout={text} in the URL must be a number of seconds (0 or more)")
    return timeout_s


def _refuse_a_read_only_mount(path: Path) -> None:
    """No connection is opened while the file's filesystem is mounted read-only.

    SQLite falls back to a read-only open when a read-write one fails, and a process's
    connections to one file share one ``-shm`` index: one opened read-only during the
    spell kept it read-only, and every write failed "attempt to write a readonly
    database" after ``mount -o remount,rw`` until fleetd restarted (seen at load, even
    with the pool dropped: a handle outlived it). Refused, the spell fails what it must
    (the writes, and the reads no open connection serves) and ends with the mount.
    """
    try:
        read_only = bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        return  # SQLite's own open says what is wrong
    if read_only:
        raise sqlite3.OperationalError(
            f"attempt to write a readonly database: {path.parent} is mounted read-only"
        )


def _on_sqlite_connect(dbapi_connection: Any, busy_timeout_s: float) -> None:
    """Per-connection settings; autocommit at the driver so we issue BEGIN ourselves."""
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {round(busy_timeout_s * 1000)}")
        _ensure_wal(cursor, busy_timeout_s)
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        # Checkpoints keep the WAL from growing; this also truncates the file afterwards.
        cursor.execute(f"PRAGMA journal_size_limit = {SQLITE_WAL_LIMIT_BYTES}")
    finally:
        cursor.close()


def _ensure_wal(cursor: Any, busy_timeout_s: float) -> None:
    """Switch to WAL once (it persists in the file); retry while another opener holds it.

    Changing the journal mode needs an exclusive lock and SQLite may answer "database is
    locked" at once, without waiting out the busy timeout, when several processes open a
    brand-new database together: so the wait is ours, bounded by the same timeout.
    """
    if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + busy_timeout_s
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


class _Generations:
    """Which connections were opened before the pool was last dropped (``retire_connections``).

    SQLite opens a file read-only when a read-write open fails (a state dir remounted
    read-only), and every connection of a process to one file shares one ``-shm`` mapping,
    opened read-only too while such a connection holds it: one read-only connection left
    open fails every write of the fresh ones with "attempt to write a readonly database".
    ``Engine.dispose`` closes only the idle connections; one checked out by another thread
    at that moment went back to the dropped pool still open (seen at load 10: the owner's
    second try after ``mount -o remount,rw`` failed too). This closes it at its check-in.
    """

    def __init__(self) -> None:
        self.current = 0

    def on_connect(self, _dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info[_GENERATION] = self.current

    def on_checkin(self, _dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        if record.info.get(_GENERATION, self.current) < self.current:
            record.invalidate()  # closed now, not when the dropped pool is collected


_GENERATION = "cmpfleet_generation"
_generations: weakref.WeakKeyDictionary[Engine, _Generations] = weakref.WeakKeyDictionary()


def retire_connections(engine: Engine) -> None:
    """Drop the pool, and close each connection still checked out when it comes back."""
    generations = _generations.get(engine)
    if generations is not None:
        generations.current += 1
    engine.dispose()


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
        busy_timeout_s = sqlite_busy_timeout_s(parsed)

        def on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
            _on_sqlite_connect(dbapi_connection, busy_timeout_s)

        database = parsed.database

        def refuse_read_only(*_args: Any) -> None:
            if database and database != ":memory:" and not database.startswith("file:"):
                _refuse_a_read_only_mount(Path(database))

        event.listen(engine, "do_connect", refuse_read_only)
        event.listen(engine, "connect", on_connect)
        event.listen(engine, "begin", _on_sqlite_begin)
        generations = _generations[engine] = _Generations()
        event.listen(engine, "connect", generations.on_connect)
        event.listen(engine, "checkin", generations.on_checkin)
        return Engines(read=engine, write=engine.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"}))
    return Engines(read=engine, write=engine)


# -- INSERT ... ON CONFLICT ----------------------------------------------------------


def _dialect_insert(session: Session, table: Table) -> Any:
    name = session.get_bind().dialect.name
    if name == "sqlite":
        return sqlite.insert(table)
    if name == "postgresql":
        return postgresql.insert(table)
    return None


def insert_ignore_returning_id(
    session: Session, table: Table, values: Mapping[str, Any], conflict_columns: Sequence[str]
) -> int | None:
    """Insert one row unless ``conflict_columns`` collide; the new ``id`` or ``None``."""
    stmt = _dialect_insert(session, table)
    if stmt is not None:
        stmt = (
            stmt.values(**values)
            .on_conflict_do_nothing(index_elements=list(conflict_columns))
            .returning(table.c.id)
        )
        found = session.execute(stmt).scalar_one_or_none()
        return None if found is None else int(found)
    try:
        with session.begin_nested():
            result = session.execute(insert(table).values(**values))
    except IntegrityError:
        return None
    key = result.inserted_primary_key  # type: ignore[attr-defined]
    return None if key is None else int(key[0])


def insert_ignore_many(
    session: Session,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    conflict_columns: Sequence[str],
) -> None:
    """Insert many rows (executemany), silently skipping rows whose key already exists."""
    if not rows:
        return
    stmt = _dialect_insert(session, table)
    if stmt is not None:
        session.execute(stmt.on_conflict_do_nothing(index_elements=list(conflict_columns)), rows)
        return
    for row in rows:
        try:
            with session.begin_nested():
                session.execute(insert(table).values(**row))
        except IntegrityError:
            continue


def upsert(
    session: Session, table: Table, values: Mapping[str, Any], key_columns: Sequence[str]
) -> None:
    """Insert the row, or update its non-key columns when the key exists."""
    stmt = _dialect_insert(session, table)
    changed = {name: value for name, value in values.items() if name not in key_columns}
    if stmt is not None:
        stmt = stmt.values(**values).on_conflict_do_update(
            index_elements=list(key_columns), set_=changed
        )
        session.execute(stmt)
        return
    where = [table.c[name] == values[name] for name in key_columns]
    result = session.execute(update(table).where(*where).values(**changed))
    if result.rowcount == 0:  # type: ignore[attr-defined]
        session.execute(insert(table).values(**values))


@dataclass(frozen=True, slots=True)
class DriverInsertIgnore:
    """A pre-compiled ``INSERT ... ON CONFLICT DO NOTHING`` run with the driver's executemany.

    SQLAlchemy's per-row parameter processing costs about as much as SQLite's insert
    itself; for the one hot path (a row per card per second) rows are built as tuples in
    the driver's representation already (times as epoch microseconds) and handed to
    ``cursor.executemany`` directly (as dicts for named paramstyles such as psycopg's).
    Only for SQLite and PostgreSQL.
    """

    sql: str
    columns: tuple[str, ...]  # the table's columns: the order rows come in
    order: tuple[str, ...] | None  # parameter order for positional paramstyles (``?``)

    @classmethod
    def compile(
        cls, dialect: Dialect, table: Table, conflict_columns: Sequence[str]
    ) -> DriverInsertIgnore | None:
        """The compiled statement for ``dialect``, or ``None`` where there is no fast path."""
        if dialect.name == "sqlite":
            stmt: Any = sqlite.insert(table)
        elif dialect.name == "postgresql":
            stmt = postgresql.insert(table)
        else:
            return None
        stmt = stmt.on_conflict_do_nothing(index_elements=list(conflict_columns))
        columns = tuple(column.name for column in table.columns)
        compiled = stmt.compile(dialect=dialect, column_keys=list(columns))
        order = compiled.positiontup
        return cls(str(compiled), columns, None if order is None else tuple(order))

    def execute(self, session: Session, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert ``rows`` (driver values in the table's column order) in one executemany."""
        if not rows:
            return
        params: Sequence[Any] = rows
        if self.order != self.columns:
            columns = self.columns
            params = [dict(zip(columns, row, strict=True)) for row in rows]
        session.connection().exec_driver_sql(self.sql, params)


# -- units of work ------------------------------------------------------------------


_NEWS = "cmpfleet_news"


def mark_news(session: Session) -> None:
    """This transaction records news (an event, the latch): tell the news listeners on commit."""
    session.info[_NEWS] = True


class Database:
    """Two views of one pool and the units of work on them; ``Store`` adds the queries.

    Each public ``Store`` method is one unit of work: it opens a session, does its reads
    and writes in one transaction, commits and returns plain rows. Database failures
    surface as ``StoreError`` naming the database; bad arguments as ``StoreInputError``.
    """

    def __init__(self, read_engine: Engine, write_engine: Engine, url: str) -> None:
        """Use ``Store.open``; this wires already-migrated engines."""
        self._read_engine = read_engine
        self._write_engine = write_engine
        self._masked_url = mask_url(url)
        self._read_sessions = sessionmaker(read_engine, expire_on_commit=False)
        self._write_sessions = sessionmaker(write_engine, expire_on_commit=False)
        self._news_listeners: list[Callable[[], None]] = []
        # Asked before every write unit (``Store.open``'s file guard): raises StoreError.
        self._before_write: Callable[[], None] | None = None

    def add_news_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after each committed write that recorded news (``mark_news``).

        How the alert engine learns that an event or the latch changed without polling the
        database; it must be quick (an event's ``set``): it runs in the writer's thread.
        """
        self._news_listeners.append(listener)

    def close(self) -> None:
        """Release every pooled connection (the store cannot be used afterwards)."""
        self._read_engine.dispose()

    @property
    def url(self) -> str:
        """The database URL with its password masked."""
        return self._masked_url

    @property
    def dialect(self) -> str:
        """``sqlite``, ``postgresql``, ..."""
        return self._read_engine.dialect.name

    @contextmanager
    def _unit(self, factory: sessionmaker[Session]) -> Iterator[Session]:
        try:
            with factory() as session, session.begin():
                yield session
        except StatementError as exc:
            if isinstance(exc.orig, StoreInputError):
                raise exc.orig from None
            self._reopen_if_read_only(exc)
            raise StoreError(f"store {self._masked_url}: {one_line_cause(exc)}") from exc
        except SQLAlchemyError as exc:
            self._reopen_if_read_only(exc)
            raise StoreError(f"store {self._masked_url}: {one_line_cause(exc)}") from exc

    def _reopen_if_read_only(self, exc: SQLAlchemyError) -> None:
        """A connection SQLite opened while the disk was read-only stays read-only for good.

        (It falls back to a read-only open when a read-write one fails.) Once the disk is
        writable again (``mount -o remount,rw`` after a filesystem error), such a pooled
        connection would fail every write until fleetd restarts: the pool is dropped
        instead, and the next unit of work opens fresh connections.
        """
        if "readonly database" in str(getattr(exc, "orig", None) or exc):
            retire_connections(self._read_engine)

    @contextmanager
    def _write_unit(self) -> Iterator[Session]:
        if self._before_write is not None:
            self._before_write()
        with self._unit(self._write_sessions) as session:
            yield session
            news = bool(session.info.get(_NEWS))
        if news:
            for listener in self._news_listeners:
                listener()

    def write(self) -> AbstractContextManager[Session]:
        """A write unit of work (``with store.write() as session``)."""
        return self._write_unit()

    def read(self) -> AbstractContextManager[Session]:
        """A read-only unit of work."""
        return self._unit(self._read_sessions)
