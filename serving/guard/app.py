"""The guard's ASGI application: the OpenAI pass-through with pins, mirror, cap and watch.

A raw ASGI callable under uvicorn (httptools, uvloop): no framework between the socket and
the proxy, because every microsecond here is added to every token an agent waits for.
Chat and completion requests are read whole (they are small: the conversation) and
steered; their replies stream back event by event as the engine writes them, watched on
the way. Every other path and method passes through byte for byte. The control routes
(``serving.guard.control``) answer only on the loopback control socket fleetd gave.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from serving.detectors import Sign
from serving.guard import errors
from serving.guard.cap import CapAction, CapVerdict, fallback_tokens, judge, may_exceed
from serving.guard.cap import tokenize_request as tokenize_body
from serving.guard.control import EngineHint, handle_control
from serving.guard.errors import GuardError
from serving.guard.keys import KeyRing, bearer
from serving.guard.mirror import mirror_choices
from serving.guard.pinning import apply_pins
from serving.guard.sessions import Session, SessionBook, Thresholds, session_id
from serving.guard.settings import GuardSettings
from serving.guard.sse import DONE, EventSplitter, data_event, event_data, event_json
from serving.guard.stats import ANONYMOUS, GuardStats
from serving.guard.upstream import (
    BROKEN,
    TOKENIZE_TIMEOUT_S,
    EngineUnreachable,
    Upstream,
    forwarded_headers,
    returned_headers,
)
from serving.guard.watch import ReplyWatch

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
OPEN_PATHS = frozenset({"/health"})  # answered without a key (load balancers, uptime checks)
STEERED_DROP = frozenset({"accept-encoding"})  # steered replies are read: plain bytes
# Engine states (fleetd's words) and how a 503 explains them.
STATE_WHY = {
    "starting": "the engine is starting",
    "backoff": "the engine crashed and restarts after a backoff",
    "stopping": "the engine is stopping",
    "stopped": "the engine is stopped",
    "held": "the engine is held after repeated crashes",
    "failed": "the engine failed to start",
}


def header(scope: Scope, name: bytes) -> str | None:
    """One request header's value (the first), or None."""
    for raw_name, value in scope["headers"]:
        if raw_name == name:
            return str(value.decode("latin-1"))
    return None


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None when it is over ``limit`` bytes."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(parts)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


async def send_error(send: Send, error: GuardError, extra: list[tuple[bytes, bytes]]) -> None:
    """Answer with one OpenAI-format error."""
    body = error.body()
    headers = [*error.headers(), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@dataclass
class Steered:
    """One chat or completion request on its way: what the guard did and will watch."""

    request: dict[str, Any]
    key: str
    session: Session
    watch: ReplyWatch
    strip_usage: bool = False
    cap: CapVerdict | None = None
    hung_up: asyncio.Event = field(default_factory=asyncio.Event)  # the client went away
    extra: list[tuple[bytes, bytes]] = field(default_factory=list)


class GuardApp:
    """The ASGI app of one guard process."""

    def __init__(
        self,
        settings: GuardSettings,
        control_address: tuple[str, int] | None,
        control_token: str,
        engine_url: str | None = None,
    ) -> None:
        self.settings = settings
        self.keys = KeyRing((key.name, key.sha256) for key in settings.keys)
        self.book = SessionBook(
            Thresholds(settings.depth_event_tokens(), settings.event_leaks, settings.event_loops)
        )
        self.stats = GuardStats(self.book)
        self.hint = EngineHint(engine_url)
        self.upstream = Upstream()
        self._control_address = control_address
        self._control_token = control_token
        self._body_limit = int(settings.max_body_mib * 1024 * 1024)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry: lifespan, the control routes, the proxy."""
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # websockets: the OpenAI API has none
        if self._control_address is not None and tuple(scope.get("server") or ()) == tuple(
            self._control_address
        ):
            await handle_control(self, scope, receive, send, self._control_token)
            return
        await self._proxy(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self.upstream.open()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.upstream.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # -- the proxy ----------------------------------------------------------------------
    def _key_of(self, scope: Scope) -> str | GuardError:
        """The client's key name, or the 401 to answer."""
        if not self.keys.enabled or scope["path"] in OPEN_PATHS:
            return ANONYMOUS
        token = bearer(header(scope, b"authorization"))
        if token is None:
            return errors.missing_key()
        name = self.keys.name_of(token)
        return errors.wrong_key() if name is None else name

    async def _proxy(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.stats.count("requests")
        key = self._key_of(scope)
        if isinstance(key, GuardError):
            self.stats.count("unauthorized")
            await send_error(send, key, [])
            return
        body = await read_body(receive, self._body_limit)
        if body is None:
            await send_error(send, errors.too_large(self.settings.max_body_mib), [])
            return
        path = scope["path"]
        if scope["method"] == "POST" and path in (CHAT, COMPLETIONS):
            request = _json_object(body)
            if request is not None:
                await self._steer(scope, receive, send, request, key, chat=path == CHAT)
                return
        await self._pass(scope, receive, send, body, key)

    def _url(self, scope: Scope, path: str | None = None) -> str | None:
        base = self.hint.url
        if base is None:
            return None
        query = scope.get("query_string", b"")
        target = path if path is not None else scope["path"]
        return f"{base}{target}" + (f"?{query.decode('latin-1')}" if query else "")

    def _unavailable(self, reason: str | None) -> GuardError:
        """The 503 for an engine that did not answer, in the words of its state."""
        state = self.hint.state()
        why = STATE_WHY.get(state or "", reason or "nothing answers on the engine's port")
        self.stats.count("engine_unavailable")
        return errors.engine_unavailable(why, self.settings.retry_after_s)

    def _upstream_headers(self, scope: Scope, steered: bool) -> list[tuple[str, str]]:
        drop = set(STEERED_DROP if steered else ())
        if self.keys.enabled:
            drop.add("authorization")  # the guard's key, not the engine's
        return forwarded_headers(scope["headers"], frozenset(drop))

    async def _open(
        self, scope: Scope, send: Send, body: bytes, steered: bool, extra: list[tuple[bytes, bytes]]
    ) -> aiohttp.ClientResponse | None:
        """Send upstream; on no answer, the 503 is sent here and None returned."""
        url = self._url(scope)
        if url is None:
            await send_error(send, self._unavailable("fleetd has not named the engine yet"), extra)
            return None
        try:
            return await self.upstream.send(
                url, scope["method"], self._upstream_headers(scope, steered), body
            )
        except EngineUnreachable as exc:
            await send_error(send, self._unavailable(str(exc)), extra)
            return None

    async def _pass(
        self, scope: Scope, receive: Receive, send: Send, body: bytes, key: str
    ) -> None:
        """Any other request: byte for byte both ways."""
        response = await self._open(scope, send, body, steered=False, extra=[])
        if response is None:
            return
        watcher = asyncio.create_task(_close_on_disconnect(receive, response, asyncio.Event()))
        try:
            await self._relay_raw(send, response, [])
        finally:
            watcher.cancel()
            response.release()

    async def _relay_raw(
        self, send: Send, response: aiohttp.ClientResponse, extra: list[tuple[bytes, bytes]]
    ) -> None:
        if response.status == 503:  # loading, or overloaded: one answer clients retry on
            with contextlib.suppress(*BROKEN):
                await response.read()
            await send_error(send, self._unavailable("the engine answered 503: not ready"), extra)
            return
        headers = [*returned_headers(response, keep_length=True), *extra]
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        try:
            async for data in response.content.iter_any():
                await send({"type": "http.response.body", "body": data, "more_body": True})
        except BROKEN:
            pass  # cut short: the connection ends without a complete body (the client sees it)
        with contextlib.suppress(RuntimeError):  # uvicorn: shorter than its Content-Length
            await send({"type": "http.response.body", "body": b""})

    # -- steering -----------------------------------------------------------------------
    async def _steer(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        request: dict[str, Any],
        key: str,
        chat: bool,
    ) -> None:
        settings = self.settings
        pins, override = settings.pins_for(self.hint.profile)
        if apply_pins(request, pins, override, chat):
            self.stats.count("pinned")
        steered = Steered(
            request,
            key,
            self.book.touch(
                session_id(request, header(scope, settings.session_header.lower().encode())),
                key,
            ),
            ReplyWatch.for_request(request, settings.loop_repeats),
        )
        steered.extra.append((b"x-cmpfleet-session", steered.session.id.encode()))
        if request.get("stream") is True:
            options = request.get("stream_options")
            options = dict(options) if isinstance(options, dict) else {}
            if not options.get("include_usage"):
                request["stream_options"] = {**options, "include_usage": True}
                steered.strip_usage = True  # asked for the accounts: the client never sees it
        if settings.max_context_tokens is not None and may_exceed(
            request, settings.max_context_tokens
        ):
            steered.cap = await self._count(scope, steered, settings.max_context_tokens)
            if steered.cap.action is CapAction.REFUSE:
                self.stats.count("cap_refused")
                self.book.observe(steered.session, steered.cap.tokens, ())
                tokens = steered.cap.tokens or 0
                error = errors.over_cap(tokens, settings.max_context_tokens)
                await send_error(send, error, steered.extra)
                return
            if steered.cap.action is CapAction.WARN:
                self.stats.count("cap_warned")
                steered.extra.append(
                    (
                        b"x-cmpfleet-context-warning",
                        f"{steered.cap.tokens} tokens, over the cap of "
                        f"{settings.max_context_tokens}: compact or start a new session".encode(),
                    )
                )
        response = await self._open(
            scope, send, json.dumps(request).encode(), steered=True, extra=steered.extra
        )
        if response is None:
            return
        watcher = asyncio.create_task(_close_on_disconnect(receive, response, steered.hung_up))
        try:
            kind = response.headers.get("Content-Type", "")
            if response.status != 200:
                await self._relay_raw(send, response, steered.extra)
                lost: str | None = "an error answer"
            elif kind.startswith("text/event-stream"):
                lost = await self._relay_stream(send, response, steered)
            else:
                lost = await self._relay_whole(send, response, steered)
        finally:
            watcher.cancel()
            response.release()
        self._account(steered, lost)

    async def _count(self, scope: Scope, steered: Steered, cap: int) -> CapVerdict:
        """The prompt's tokens by the engine's tokenizer, or the best estimate without it."""
        url = self._url(scope, "/tokenize")
        request = steered.request
        if url is not None:
            try:
                answer = await self.upstream.post_json(
                    url, tokenize_body(request, _model(request)), TOKENIZE_TIMEOUT_S
                )
                count = answer.get("count") if isinstance(answer, dict) else None
                if isinstance(count, int):
                    return judge(count, cap, self.settings.cap_mode, "tokenize")
            except EngineUnreachable:
                pass
        self.stats.count("cap_estimated")
        tokens = fallback_tokens(request, self.book.depth(steered.session.id))
        return judge(tokens, cap, self.settings.cap_mode, "estimate")

    async def _relay_stream(
        self, send: Send, response: aiohttp.ClientResponse, steered: Steered
    ) -> str | None:
        """Relay SSE events as they come; None when the stream ended with ``[DONE]``."""
        headers = [*returned_headers(response, keep_length=False), *steered.extra]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        mode = self.settings.mirror_reasoning
        splitter = EventSplitter()
        done = mirrored = False
        lost: str | None = None
        try:
            async for data in response.content.iter_any():
                out: list[bytes] = []
                for event in splitter.feed(data):
                    payload = event_data(event)
                    chunk = None if payload is None else event_json(payload)
                    if chunk is None:
                        done = done or payload == DONE
                        out.append(event)
                        continue
                    steered.watch.chunk(chunk)
                    if steered.strip_usage and chunk.get("choices") == [] and chunk.get("usage"):
                        continue
                    if mode and mirror_choices(chunk, mode, "delta"):
                        mirrored = True
                        out.append(data_event(chunk))
                        continue
                    out.append(event)
                if out:
                    await send(
                        {"type": "http.response.body", "body": b"".join(out), "more_body": True}
                    )
        except BROKEN as exc:
            lost = str(exc) or type(exc).__name__
        if mirrored:
            self.stats.count("mirrored")
        if steered.hung_up.is_set():
            return "the client hung up"  # not the engine's doing: no error event, no count
        if not done:
            lost = lost or "the engine closed the connection"
            self.stats.count("streams_lost")
            event = errors.stream_lost(lost).event()
            with contextlib.suppress(Exception):
                await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return lost

    async def _relay_whole(
        self, send: Send, response: aiohttp.ClientResponse, steered: Steered
    ) -> str | None:
        """A whole JSON reply: read, watched, mirrored, sent; the reason when it broke off."""
        try:
            raw = await response.read()
        except BROKEN as exc:
            await send_error(send, errors.bad_gateway(str(exc), self.settings.retry_after_s), [])
            return str(exc)
        body = _json_object(raw)
        if body is not None:
            steered.watch.whole(body)
            if mirror_choices(body, self.settings.mirror_reasoning, "message"):
                self.stats.count("mirrored")
                raw = json.dumps(body).encode()
        headers = [*returned_headers(response, keep_length=False), *steered.extra]
        headers.append((b"content-length", str(len(raw)).encode()))
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": raw})
        return None

    def _account(self, steered: Steered, lost: str | None) -> None:
        """Tokens to the key, depth and signs to the session (a broken reply shows no signs)."""
        usage = steered.watch.usage
        self.stats.account(steered.key, usage)
        signs: frozenset[Sign] = frozenset() if lost else steered.watch.signs()
        self.stats.signs.update(str(sign) for sign in signs)
        depth = usage.prompt_tokens if usage is not None else None
        if depth is None and steered.cap is not None:
            depth = steered.cap.tokens
        self.book.observe(steered.session, depth, signs)


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _model(request: dict[str, Any]) -> str | None:
    model = request.get("model")
    return model if isinstance(model, str) else None


async def _close_on_disconnect(
    receive: Receive, response: aiohttp.ClientResponse, hung_up: asyncio.Event
) -> None:
    """A client that hangs up ends the engine's request too (vLLM aborts it, freeing slots)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            hung_up.set()
            response.close()
            return
