"""On a loopback listener, only requests addressed to this machine's names are served.

A loopback listener serves reads without the token: any local process may read the rig.
So may a web page, through DNS rebinding: a site the owner visits re-points its own name
at 127.0.0.1, and the browser then reads ``http://evil.example:8170/api/v1/status`` as
same-origin. Such a request still carries the attacker's name in ``Host``; answering only
requests whose ``Host`` is loopback, this machine's own name or a name the owner allowed
(``[web] allowed_hosts``, for a reverse proxy that keeps the client's ``Host``) closes it.
A request without ``Host`` (an HTTP/1.0 tool) is no browser and passes.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Collection

from starlette.types import ASGIApp, Receive, Scope, Send

from web.loopback import is_loopback


def allowed_hosts(listen_host: str, configured: Collection[str]) -> list[str] | None:
    """A loopback listener's ``Host`` names beside loopback's: this machine's, the config's.

    None beyond loopback: every request needs the token there, no rebinding to fear.
    """
    if not is_loopback(listen_host):
        return None
    return [socket.gethostname(), *configured]


def host_name(header: str) -> str:
    """The name in a ``Host`` header, lower-case, without port or IPv6 brackets."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value[1:]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class LoopbackHosts:
    """Answer 403 ``host_not_allowed`` to a request whose ``Host`` is not this machine's."""

    def __init__(self, app: ASGIApp, allowed: Collection[str]) -> None:
        self.app = app
        self.allowed = frozenset(name.lower() for name in allowed)

    def allows(self, header: str) -> bool:
        """True for loopback names, this machine's own and the allowed ones."""
        name = host_name(header)
        return is_loopback(name) or name in self.allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass requests addressed to this machine; refuse the rest before any route runs."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = next((v for k, v in scope.get("headers", []) if k == b"host"), None)
        if header is None or self.allows(header.decode("latin-1")):
            await self.app(scope, receive, send)
            return
        name = host_name(header.decode("latin-1"))
        body = json.dumps(
            {
                "detail": f"host {name!r} is not this rig: fleetd listens on loopback and "
                "answers only to its own names (behind a proxy that keeps the client's "
                "Host, add the name to [web] allowed_hosts)",
                "code": "host_not_allowed",
            }
        ).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 403, "headers": headers})
        await send({"type": "http.response.body", "body": body})
