"""Column types shared by the models and the migrations (they must describe one schema).

Times are BIGINT microseconds since the epoch on every dialect, enums are their values in a
VARCHAR, JSON is JSONB on PostgreSQL: one definition keeps a migrated database identical
to a model-built one.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Dialect, String
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.types import TypeDecorator, TypeEngine

from daemon.store.db import from_epoch_us, to_epoch_us


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


class EnumText(TypeDecorator[Any]):
    """A StrEnum stored as its value in a VARCHAR; read back as the enum member."""

    impl = String
    cache_ok = True

    def __init__(self, enum_type: type[enum.StrEnum], length: int) -> None:
        """Values of ``enum_type`` in a ``VARCHAR(length)``."""
        super().__init__(length)
        self.enum_type = enum_type

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        """A member (or its value) -> the value; anything else is refused."""
        return None if value is None else self.enum_type(value).value

    def process_result_value(self, value: Any | None, dialect: Dialect) -> enum.StrEnum | None:
        """The stored value -> the member."""
        return None if value is None else self.enum_type(value)


def json_type() -> TypeEngine[Any]:
    """JSON everywhere, JSONB on PostgreSQL (indexable, compact)."""
    return JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
