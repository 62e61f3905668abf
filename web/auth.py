"""The API token as the web layer checks it: the bearer header and a constant-time compare.

The daemon owns the token file (creates it, reads it) and hands the token to the app;
the web layer only compares what a request carries against it.
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from web.errors import http_error_response


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


class RemoteToken:
    """On a non-loopback listener every route but ``/healthz`` needs the token (plain ASGI).

    ``token`` is ``None`` on a loopback listener: requests pass straight through. Plain
    ASGI rather than ``@app.middleware``: that wrapper costs a task and a copy per request.
    """

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 401 (no token) or 403 (a wrong one) before the app sees the request."""
        if self.token is None or scope["type"] != "http" or scope["path"] == "/healthz":
            await self.app(scope, receive, send)
            return
        given = bearer(Request(scope))
        if given is None:
            refusal = HTTPException(401, "missing bearer token", {"WWW-Authenticate": "Bearer"})
        elif not token_matches(self.token, given):
            refusal = HTTPException(403, "wrong token")
        else:
            await self.app(scope, receive, send)
            return
        await http_error_response(refusal)(scope, receive, send)
