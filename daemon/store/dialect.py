"""INSERT ... ON CONFLICT for SQLite and PostgreSQL through their dialect constructs.

Both dialects spell "insert unless the key exists" and "insert or update" the same way
in SQLAlchemy (``on_conflict_do_nothing``/``on_conflict_do_update``); other databases
get a plain INSERT inside a savepoint, with a key collision read as "already there".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Dialect, Table, insert, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session


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
