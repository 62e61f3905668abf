"""The one error the store raises for database trouble, and how it names the database.

Callers (the daemon at start-up, the API) print ``str(StoreError)`` as-is, so it must be
one line that says which database (password masked) and what went wrong, never a
traceback or a driver's multi-line dump.
"""

from __future__ import annotations

import re

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

_PASSWORD_IN_URL = re.compile(r"(://[^:/@]*:)[^@]*@")


class StoreError(Exception):
    """The database could not be opened, upgraded, read or written."""


class StoreInputError(ValueError):
    """A caller handed the store a value it cannot take (unknown kind, naive time...)."""


def mask_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (also for URLs that do not parse)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return _PASSWORD_IN_URL.sub(r"\1***@", url)


def one_line_cause(exc: BaseException) -> str:
    """The first meaningful line of a driver error (SQLAlchemy wraps it in ``.orig``)."""
    inner = getattr(exc, "orig", None) or exc
    text = str(inner).strip()
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if line:
            return line
    return type(inner).__name__
