"""Path and query parameters shared by routes, bounded so the database can hold them.

SQLite and PostgreSQL keep ids in signed 64-bit integers: an id past that is not "not
found" but an overflow inside the driver (a 500), so the bound is declared here and
FastAPI answers 422 before any query runs.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

MAX_ROW_ID = 2**63 - 1
MAX_CARD_INDEX = 63  # NVML indexes; a rig holds 3 to 8 cards

RowId = Annotated[int, Path(ge=1, le=MAX_ROW_ID, description="a stored row's id")]
CardFilter = Annotated[int | None, Query(ge=0, le=MAX_CARD_INDEX, description="card index")]
BeforeId = Annotated[
    int | None,
    Query(ge=1, le=MAX_ROW_ID, description="next page: events listed after this id"),
]
