"""The API token as the web layer checks it: the bearer header and a constant-time compare.

The daemon owns the token file (creates it, reads it) and hands the token to the app;
the web layer only compares what a request carries against it.

A browser opening the dashboard of a rig listening beyond loopback cannot add a bearer
header to a page load (nor to an ``EventSource``), so on such a listener reads also take
the token as the password of HTTP Basic (any user name): a page load without it is
answered with a Basic challenge, the browser asks once and then sends it with every
request of the page. Writes never take Basic: a browser attaches a saved login to any
site's cross-site form post, so POSTs keep needing the bearer header (which the
dashboard's scripts send, and another site cannot).
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Callable
from typing import Annotated

from fastapi import HTTPException, Request, Security
from fastapi.security import HTTPAuthorizationCredentials
from starlette.types import ASGIApp, Receive, Scope, Send

from web.errors import http_error_response
from web.openapi_doc import BEARER


def bearer(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or ``None``."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def basic_password(request: Request) -> str | None:
    """The password of an ``Authorization: Basic`` header (the user name is ignored)."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value.strip():
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    _, colon, password = decoded.partition(":")
    return password if colon and password else None


READ_METHODS = frozenset({"GET", "HEAD"})
BASIC_CHALLENGE = 'Basic realm="cmpfleet", charset="UTF-8"'


def request_token(request: Request) -> str | None:
    """The token a request carries: a bearer header, or for a read HTTP Basic's password."""
    given = bearer(request)
    if given is None and request.method in READ_METHODS:
        given = basic_password(request)
    return given


def wants_a_page(request: Request) -> bool:
    """A browser loading a page (it lists HTML first among what it accepts)."""
    return request.method in READ_METHODS and "text/html" in request.headers.get("accept", "")


def token_matches(expected: str, given: str) -> bool:
    """Constant-time comparison (no timing hint about how much of the token matched)."""
    return hmac.compare_digest(expected.encode(), given.encode())


class TokenGuard:
    """The token a guarded route needs, as a FastAPI dependency: 401 without it, 403 wrong.

    Each router that guards routes takes one (``Depends(guard)``), so the rule is written
    once. It declares ``BEARER`` so ``/docs`` shows the lock on each guarded route, but
    reads the header itself: a read's HTTP Basic password counts too (see the module).
    """

    def __init__(self, token: Callable[[], str]) -> None:
        self._token = token

    def __call__(
        self,
        request: Request,
        _declared: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)] = None,
    ) -> None:
        """Refuse a request without the token (401) or with a wrong one (403)."""
        given = request_token(request)
        if given is None:
            raise HTTPException(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
        if not token_matches(self._token(), given):
            raise HTTPException(403, "wrong token")


class RemoteToken:
    """On a non-loopback listener every route but ``/healthz`` needs the token (plain ASGI).

    Reads take it as a bearer header or as HTTP Basic's password; writes as a bearer header
    only (the module's docstring says why). ``token`` is ``None`` on a loopback listener:
    requests pass straight through. Plain
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
        request = Request(scope)
        given = request_token(request)
        if given is None:
            # A page load gets the Basic challenge, so the browser asks for the token.
            challenge = BASIC_CHALLENGE if wants_a_page(request) else "Bearer"
            refusal = HTTPException(401, "missing bearer token", {"WWW-Authenticate": challenge})
        elif not token_matches(self.token, given):
            refusal = HTTPException(403, "wrong token")
        else:
            await self.app(scope, receive, send)
            return
        await http_error_response(refusal)(scope, receive, send)
