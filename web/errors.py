"""The one place where domain errors become HTTP answers.

Domain code raises ``serving.errors`` classes and knows nothing of status codes; this
module maps each class to its status and installs a single FastAPI exception handler.
The body is ``{"detail": message, "code": code}`` (fleetctl prints ``detail`` and maps
some ``code`` values, e.g. ``reboot_latch``, to its exit codes).
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from serving.errors import (
    Busy,
    Conflict,
    DomainError,
    InvalidInput,
    NotFound,
    Refused,
    Unavailable,
)

STATUS_BY_ERROR: dict[type[DomainError], int] = {
    InvalidInput: 400,
    NotFound: 404,
    Refused: 409,
    Conflict: 409,
    Busy: 429,
    Unavailable: 503,
}
FALLBACK_STATUS = 500  # a DomainError subclass nobody mapped: a bug, said plainly


def status_of(error: DomainError) -> int:
    """The status for ``error``: its own class's, else the nearest mapped base class's."""
    for cls in type(error).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return FALLBACK_STATUS


def install_error_handler(app: FastAPI) -> None:
    """Answer every ``DomainError`` with its status and ``{"detail", "code"}``."""

    async def domain_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, DomainError)  # noqa: S101 - registered for DomainError only
        return JSONResponse({"detail": exc.message, "code": exc.code}, status_of(exc))

    app.add_exception_handler(DomainError, domain_error)
