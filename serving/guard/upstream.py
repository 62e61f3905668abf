"""The guard's connections to the engine: one pooled aiohttp client, bodies as they come.

aiohttp rather than httpx: on this workload (many long SSE streams, one event per token)
httpx's async client spent several times aiohttp's CPU per chunk (bench/guard_overhead.py
and the figures in the commit that chose it), and the guard's budget is a fraction of a
millisecond per request. Connections are kept alive and reused (vLLM's uvicorn keeps
them open); bodies are never decompressed here, so a pass-through is byte for byte.

uvicorn ends an idle kept-alive connection after 5 s. A request the guard writes into such
a connection at that moment meets a reset or a close with no answer: the engine never read
it (uvicorn closes only a connection with no request in flight). Such a request, on a
*reused* connection with no answer, is sent once more on a fresh connection; only when
that fails too is the engine unreachable (a 503 with ``Retry-After``, issue 36).
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
UNREACHABLE = (aiohttp.ClientError, ConnectionError)
BROKEN = (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError)
# No answer at all on a connection: what a pooled connection the engine closed gives.
NO_ANSWER = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, ConnectionError)


class EngineUnreachable(Exception):
    """Nothing answered on the engine's address (refused, reset before an answer)."""


class Upstream:
    """A pooled client to one engine base URL (changed when fleetd says so)."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._fresh: aiohttp.ClientSession | None = None  # a new connection per request

    async def open(self) -> None:
        """Create the pool and the fresh-connection client (inside the running loop)."""
        reuse = aiohttp.TraceConfig()
        reuse.on_connection_reuseconn.append(_mark_reused)
        self._session = _client_session(
            aiohttp.TCPConnector(limit=0, keepalive_timeout=30.0, ttl_dns_cache=None), [reuse]
        )
        self._fresh = _client_session(
            aiohttp.TCPConnector(limit=0, force_close=True, ttl_dns_cache=None), []
        )

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("the upstream pool is not open (the app's lifespan opens it)")
        return self._session

    async def close(self) -> None:
        """Close every pooled connection."""
        for session in (self._session, self._fresh):
            if session is not None:
                await session.close()

    async def send(
        self, url: str, method: str, headers: Iterable[tuple[str, str]], body: bytes
    ) -> aiohttp.ClientResponse:
        """Send one request; the response with its body still to read (caller releases it).

        A reused connection that gave no answer at all is retried once on a fresh one.
        """
        session = self._client()
        sent = list(headers)
        trace: dict[str, bool] = {}
        try:
            return await session.request(
                method,
                url,
                data=body or None,
                headers=sent,
                allow_redirects=False,
                compress=None,
                trace_request_ctx=trace,
            )
        except NO_ANSWER as exc:
            if not trace.get("reused") or self._fresh is None:
                raise EngineUnreachable(_why(exc)) from None
            session = self._fresh
        except UNREACHABLE as exc:
            raise EngineUnreachable(_why(exc)) from None
        try:
            return await session.request(
                method, url, data=body or None, headers=sent, allow_redirects=False, compress=None
            )
        except UNREACHABLE as exc:
            raise EngineUnreachable(_why(exc)) from None

    async def get_json(self, url: str, timeout_s: float) -> Any:
        """GET JSON (an engine's ``/v1/models``); ``EngineUnreachable`` on any failure."""
        session = self._client()
        try:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
                if response.status != 200:
                    raise EngineUnreachable(f"HTTP {response.status}")
                return json.loads(await response.read())
        except (*BROKEN, ValueError) as exc:
            forget_traceback(exc)
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
            forget_traceback(exc)
            raise EngineUnreachable(_why(exc)) from None


def forget_traceback(exc: BaseException) -> None:
    """Drop a caught engine error's traceback: aiohttp raises one shared instance.

    A response closed early (the client hung up) makes every later read raise aiohttp's
    module-level ``_CONNECTION_CLOSED_EXCEPTION``. Each raise appends that request's frames
    to the one object's ``__traceback__``, so every aborted stream's frames, its request and
    its response stayed reachable: about 13 KB an abort, for the guard's lifetime (issue 36;
    ``bench/guard_aborts.py``). Every handler of :data:`BROKEN` calls this.
    """
    exc.__traceback__ = None


def _client_session(
    connector: aiohttp.TCPConnector, traces: list[aiohttp.TraceConfig]
) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=connector,
        auto_decompress=False,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S),
        skip_auto_headers=("User-Agent", "Accept-Encoding", "Accept", "Content-Type"),
        trace_configs=traces,
    )


async def _mark_reused(
    _session: aiohttp.ClientSession, context: Any, _params: aiohttp.TraceConnectionReuseconnParams
) -> None:
    """The request went out on a pooled connection (a reset then means "not read")."""
    if isinstance(context.trace_request_ctx, dict):
        context.trace_request_ctx["reused"] = True


def _why(exc: BaseException) -> str:
    """A short reason for a failed call ("connection refused", "timed out")."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, ConnectionRefusedError):
            return "connection refused"
        return exc.os_error.strerror or str(exc.os_error)
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__


def named_in_connection(headers: Iterable[tuple[bytes, bytes]]) -> frozenset[str]:
    """The headers a ``Connection:`` header names: hop-by-hop too (RFC 9110 7.6.1)."""
    named: set[str] = set()
    for raw_name, raw_value in headers:
        if raw_name.lower() == b"connection":
            for token in raw_value.decode("latin-1").split(","):
                if token.strip():
                    named.add(token.strip().lower())
    return frozenset(named)


def forwarded_headers(
    headers: Iterable[tuple[bytes, bytes]], drop: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    """The client's headers as the engine gets them: hop-by-hop and ``drop`` removed.

    Hop-by-hop: the fixed list and every header the client's ``Connection:`` names.
    """
    headers = list(headers)
    drop = drop | named_in_connection(headers)
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
    """The engine's response headers as the client gets them (hop-by-hop ones removed)."""
    named = named_in_connection(response.raw_headers)
    kept: list[tuple[bytes, bytes]] = []
    for raw_name, raw_value in response.raw_headers:
        name = raw_name.lower()
        text = name.decode("latin-1")
        if text in named or (
            text in HOP_BY_HOP and not (keep_length and name == b"content-length")
        ):
            continue
        if name == b"date":
            continue  # uvicorn writes its own
        kept.append((name, raw_value))
    return kept
