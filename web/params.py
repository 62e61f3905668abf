"""Path and query parameters shared by routes, bounded so the database can hold them.

SQLite and PostgreSQL keep ids in signed 64-bit integers: an id past that is not "not
found" but an overflow inside the driver (a 500), so the bound is declared here and
FastAPI answers 422 before any query runs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import Path, Query
from pydantic import AfterValidator

MAX_ROW_ID = 2**63 - 1
MAX_CARD_INDEX = 63  # NVML indexes; a rig holds 3 to 8 cards

RowId = Annotated[int, Path(ge=1, le=MAX_ROW_ID, description="a stored row's id")]
CardFilter = Annotated[int | None, Query(ge=0, le=MAX_CARD_INDEX, description="card index")]
BeforeId = Annotated[
    int | None,
    Query(ge=1, le=MAX_ROW_ID, description="next page: events listed after this id"),
]


def _in_utc(value: datetime | None) -> datetime | None:
    """The time in UTC (naive is UTC); one at the calendar's edge is refused (422, not 500).

    ``0001-01-01T00:00:00+14:00`` is a valid ISO 8601 time that no UTC datetime can hold.
    """
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("the time is outside the range of a UTC date (years 1 to 9999)") from None


QueryTime = Annotated[datetime | None, AfterValidator(_in_utc)]
SinceTime = Annotated[QueryTime, Query(description="from this time (included)")]
UntilTime = Annotated[QueryTime, Query(description="up to this time (included)")]
