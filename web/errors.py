"""The one place where errors become HTTP answers.

Domain code raises ``serving.errors`` classes and knows nothing of status codes; this
module maps each class to its status and installs a single FastAPI exception handler.
The body is ``{"detail": message, "code": code}`` (fleetctl prints ``detail`` and maps
some ``code`` values, e.g. ``reboot_latch``, to its exit codes), plus ``reasons`` when the
refusal has them: every reason with its own code (``detail`` joins them, ``code`` is the
first's).

Request validation errors (422) keep FastAPI's ``detail`` list of ``{loc, msg, type}``
but never echo the input back: a huge or hostile body is not returned to its sender,
and a value JSON cannot carry (``1e400`` parses to infinity) cannot turn a 422 into a 500.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from serving.errors import (
    Busy,
    Conflict,
    DomainError,
    InvalidInput,
    NotFound,
    Refused,
    Unavailable,
)
from web.models import ErrorDocument

STATUS_BY_ERROR: dict[type[DomainError], int] = {
    InvalidInput: 400,
    NotFound: 404,
    Refused: 409,
    Conflict: 409,
    Busy: 429,
    Unavailable: 503,
}
FALLBACK_STATUS = 500  # a DomainError subclass nobody mapped: a bug, said plainly
MAX_MESSAGE_CHARS = 200  # a validation message quoting its input is cut, never a page long


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for domain refusals: each answers an ``ErrorDocument``."""
    return {status: {"model": ErrorDocument} for status in statuses}


def status_of(error: DomainError) -> int:
    """The status for ``error``: its own class's, else the nearest mapped base class's."""
    for cls in type(error).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return FALLBACK_STATUS


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_MESSAGE_CHARS else line[: MAX_MESSAGE_CHARS - 3] + "..."


HTTP_CODES = {
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
}


def http_error_response(exc: StarletteHTTPException) -> JSONResponse:
    """An ``HTTPException`` (token, unknown route, simulation off) as ``{detail, code}``."""
    code = HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    return JSONResponse({"detail": exc.detail, "code": code}, exc.status_code, exc.headers)


def install_error_handlers(app: FastAPI) -> None:
    """Every error body is ``{"detail": ..., "code": ...}``; a 422 never echoes its input."""

    async def domain_error(_: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, DomainError):  # registered for DomainError only
            raise exc
        body: dict[str, Any] = {"detail": exc.message, "code": exc.code}
        if exc.reasons:
            body["reasons"] = [
                {"code": reason.code, "message": reason.line, "blocking": True}
                for reason in exc.reasons
            ]
        return JSONResponse(body, status_of(exc))

    async def invalid_request(_: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, RequestValidationError):  # registered for it only
            raise exc
        detail = [
            {
                "loc": list(error.get("loc", ())),
                "msg": _one_line(str(error.get("msg", "invalid"))),
                "type": str(error.get("type", "value_error")),
            }
            for error in exc.errors()
        ]
        return JSONResponse({"detail": detail, "code": "invalid_request"}, 422)

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, StarletteHTTPException):  # registered for it only
            raise exc
        return http_error_response(exc)

    app.add_exception_handler(DomainError, domain_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(StarletteHTTPException, http_error)
