"""The guard's connections to the engine: one pooled aiohttp client, bodies as they come.

aiohttp rather than httpx: on this workload (many long SSE streams, one event per token)
httpx's async client spent several times aiohttp's CPU per chunk (bench/guard_overhead.py
and the figures in the commit that chose it), and the guard's budget is a fraction of a
millisecond per request. Connections are kept alive and reused (vLLM's uvicorn keeps
them open); bodies are never decompressed here, so a pass-through is byte for byte.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any

import aiohttp

CONNECT_TIMEOUT_S = 5.0
TOKENIZE_TIMEOUT_S = 10.0
# Hop-by-hop headers (RFC 9110 7.6.1) and those the client library sets itself.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
UNREACHABLE = (aiohttp.ClientConnectorError, aiohttp.ServerDisconnectedError, ConnectionError)
BROKEN = (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError)


class EngineUnreachable(Exception):
    """Nothing answered on the engine's address (refused, reset before an answer)."""


class Upstream:
    """A pooled client to one engine base URL (changed when fleetd says so)."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        """Create the pool (inside the running loop)."""
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=30.0, ttl_dns_cache=None)
        self._session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S),
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Accept", "Content-Type"),
        )

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("the upstream pool is not open (the app's lifespan opens it)")
        return self._session

    async def close(self) -> None:
        """Close every pooled connection."""
        if self._session is not None:
            await self._session.close()

    async def send(
        self, url: str, method: str, headers: Iterable[tuple[str, str]], body: bytes
    ) -> aiohttp.ClientResponse:
        """Send one request; the response with its body still to read (caller releases it)."""
        session = self._client()
        try:
            return await session.request(
                method,
                url,
                data=body or None,
                headers=list(headers),
                allow_redirects=False,
                compress=None,
            )
        except UNREACHABLE as exc:
            raise EngineUnreachable(_why(exc)) from None

    async def post_json(self, url: str, body: dict[str, Any], timeout_s: float) -> Any:
        """POST JSON and read JSON back (``/tokenize``); ``EngineUnreachable`` on any failure."""
        session = self._client()
        try:
            async with session.post(
                url,
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as response:
                if response.status != 200:
                    raise EngineUnreachable(f"HTTP {response.status}")
                return json.loads(await response.read())
        except (*BROKEN, ValueError) as exc:
            raise EngineUnreachable(_why(exc)) from None


def _why(exc: BaseException) -> str:
    """A short reason for a failed call ("connection refused", "timed out")."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, ConnectionRefusedError):
            return "connection refused"
        return exc.os_error.strerror or str(exc.os_error)
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__


def forwarded_headers(
    headers: Iterable[tuple[bytes, bytes]], drop: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    """The client's headers as the engine gets them: hop-by-hop and ``drop`` removed."""
    kept: list[tuple[str, str]] = []
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1").lower()
        if name in HOP_BY_HOP or name in drop:
            continue
        kept.append((name, raw_value.decode("latin-1")))
    return kept


def returned_headers(
    response: aiohttp.ClientResponse, keep_length: bool
) -> list[tuple[bytes, bytes]]:
    """The engine's response headers as the client gets them."""
    kept: list[tuple[bytes, bytes]] = []
    for raw_name, raw_value in response.raw_headers:
        name = raw_name.lower()
        if name.decode("latin-1") in HOP_BY_HOP and not (keep_length and name == b"content-length"):
            continue
        if name == b"date":
            continue  # uvicorn writes its own
        kept.append((name, raw_value))
    return kept
