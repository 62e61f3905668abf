"""The API token as the web layer checks it: the bearer header and a constant-time compare.

The daemon owns the token file (creates it, reads it) and hands the token to the app;
the web layer only compares what a request carries against it.
"""

from __future__ import annotations

import hmac

from fastapi import Request


def bearer(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or ``None``."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def token_matches(expected: str, given: str) -> bool:
    """Constant-time comparison (no timing hint about how much of the token matched)."""
    return hmac.compare_digest(expected.encode(), given.encode())
