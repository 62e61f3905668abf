"""One HTTP request from fleetctl to fleetd over the standard library's ``http.client``.

Why not httpx here: importing httpx costs more than the whole start-up budget of
``fleetctl status`` (about 100 ms on a quiet 2-core box, 300 ms under load, against a
150 ms target), and a request to one daemon needs none of what it adds (pools, HTTP/2,
async). httpx stays where it earns its cost: ``logs --follow`` and ``fleet`` (many rigs
at once, asyncio). Failures come back as ``Unreachable`` with the reason in words, the
same words whichever transport met them (``connection refused``, ``connected, but no
answer within 10 s``), so a person reads what happened, not a class name.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

PORT_LIMIT = 65536


class Unreachable(Exception):
    """No HTTP answer came back; the message says why in words."""


@dataclass(frozen=True)
class Reply:
    """An answer: status, content type and body (already read)."""

    status: int
    content_type: str
    body: bytes

    def json(self) -> Any:
        """The body as JSON (``ValueError`` when it is not)."""
        return json.loads(self.body)


def url_problem(url: str) -> str | None:
    """Why ``url`` is not fleetd's ``http(s)://HOST[:PORT]`` URL, or None when it is one.

    Checked before any request, so ``--url 127.0.0.1:8170`` gets this one line instead
    of an error from deep inside the HTTP code.
    """
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return f"{url!r} is not a URL: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{url!r} is not an http(s)://HOST[:PORT] URL"
    port = _port_text(parts.netloc)
    if port is not None and (not port.isdecimal() or not 0 < int(port) < PORT_LIMIT):
        return f"{url!r}: port {port} is out of range (1-65535)"
    return None


def _port_text(netloc: str) -> str | None:
    """The port as written after the host (``[::1]:8170`` too), or None without one."""
    host = netloc.rsplit("@", 1)[-1]
    if host.startswith("["):
        _, _, rest = host.partition("]")
        return rest[1:] if rest.startswith(":") else None
    _, colon, port = host.partition(":")
    return port if colon else None


def host_of(url: str) -> str:
    """The host name or address of ``url`` (lower case, IPv6 without brackets)."""
    return urlsplit(url).hostname or ""


def _reason(exc: OSError, timeout_s: float, connected: bool) -> str:
    """Why there is no answer, in the words a person reads."""
    if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError
        if connected:
            return f"connected, but no answer within {timeout_s:g} s"
        return f"no connection within {timeout_s:g} s"
    if isinstance(exc, http.client.HTTPException | ConnectionResetError):
        return f"the peer broke off the HTTP exchange ({exc or exc.__class__.__name__})"
    text = exc.strerror or str(exc)
    if isinstance(exc, socket.gaierror):
        text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    text = re.sub(r"^\[Errno -?\d+\]\s*", "", text).strip() or "connection failed"
    return text[0].lower() + text[1:]


def request(
    method: str,
    url: str,
    *,
    headers: dict[str, str] | None = None,
    params: dict[str, Any] | None = None,
    json_body: Any = None,
    timeout_s: float = 10.0,
) -> Reply:
    """Send one request and read the whole answer; ``Unreachable`` when none comes."""
    parts = urlsplit(url)
    path = parts.path or "/"
    if params:
        path += "?" + urlencode(
            {k: str(v).lower() if isinstance(v, bool) else v for k, v in params.items()}
        )
    body = None if json_body is None else json.dumps(json_body).encode()
    sent = {"Accept": "application/json", **(headers or {})}
    if body is not None:
        sent["Content-Type"] = "application/json"
    connection = _connection(parts.scheme, parts.hostname or "", parts.port, timeout_s)
    connected = False
    try:
        connection.connect()
        connected = True
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        data = response.read()
    except OSError as exc:
        raise Unreachable(_reason(exc, timeout_s, connected)) from None
    except http.client.HTTPException as exc:
        raise Unreachable(
            f"the peer broke off the HTTP exchange ({exc.__class__.__name__})"
        ) from None
    finally:
        connection.close()
    content_type = response.getheader("content-type") or "no content type"
    return Reply(response.status, content_type.split(";")[0].strip(), data)


def _connection(
    scheme: str, host: str, port: int | None, timeout_s: float
) -> http.client.HTTPConnection:
    if scheme == "https":  # ssl is imported only for the rigs that use it
        import ssl

        context = ssl.create_default_context()
        return http.client.HTTPSConnection(host, port, timeout=timeout_s, context=context)
    return http.client.HTTPConnection(host, port, timeout=timeout_s)
