"""Column types shared by the models and the frozen migrations.

Times are stored as integer microseconds since the Unix epoch (UTC) on every dialect:
compact in SQLite (the 48 h raw window is about 1.4 million rows for 8 cards), exact,
ordered, and a minute bucket is plain integer division on any database, so the rollup
SQL is the same for SQLite and PostgreSQL. Python sees timezone-aware UTC datetimes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from sqlalchemy import JSON, BigInteger
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

from daemon.store.errors import StoreInputError

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


class UtcTimestamp(TypeDecorator[datetime]):
    """An aware UTC datetime stored as BIGINT microseconds since the epoch."""

    impl = BigInteger
    cache_ok = True

    def process_bind_param(self, value: datetime | int | None, dialect: Dialect) -> int | None:
        """Aware datetime -> integer microseconds (naive datetimes are refused).

        An ``int`` is taken as already being epoch microseconds: the store's bulk paths
        convert once per poll instead of once per row.
        """
        if value is None:
            return None
        if isinstance(value, int):
            return value
        return to_epoch_us(value)

    def process_result_value(self, value: Any | None, dialect: Dialect) -> datetime | None:
        """Integer microseconds -> aware UTC datetime."""
        if value is None:
            return None
        return from_epoch_us(int(value))


def json_type() -> TypeEngine[Any]:
    """JSON everywhere, JSONB on PostgreSQL (indexable, compact)."""
    return JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")


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
