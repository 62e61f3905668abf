"""The guard's ASGI application: the OpenAI pass-through with pins, mirror, cap and watch.

A raw ASGI callable under uvicorn (httptools, uvloop): no framework between the socket and
the proxy, because every microsecond here is added to every token an agent waits for.
Chat and completion requests are read whole (they are small: the conversation) and
steered; their replies stream back event by event as the engine writes them, watched on
the way. The other routes of ``[guard] routes`` (OpenAI's, by default) pass through byte
for byte; any other path is a 404 in OpenAI's shape, never the engine's (its admin and
``/sim/*`` routes are not for agents). The control routes (``serving.guard.control``)
answer only on the loopback control socket fleetd gave.
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
from serving.guard.cap import (
    CapAction,
    CapVerdict,
    fallback_tokens,
    judge,
    may_exceed,
    prompt_chars,
    rendered_tokens,
    token_ids,
)
from serving.guard.cap import tokenize_request as tokenize_body
from serving.guard.control import EngineHint, handle_control
from serving.guard.counters import GuardCounter
from serving.guard.errors import GuardError
from serving.guard.keys import KeyRing, bearer
from serving.guard.mirror import mirror_choices
from serving.guard.pinning import apply_pins
from serving.guard.repair.answers import queue_full
from serving.guard.repair.hooks import Repairs, ReplyRepair, Timing, nudged_request, runs_under
from serving.guard.repair.queue import FairQueue, KeyLimit, QueueTimeout
from serving.guard.repair.relay import StreamFixer
from serving.guard.request_json import BadRequestJson, request_object
from serving.guard.routing import MODELS, ROUTE, EngineRoute, merged_models, route_for
from serving.guard.sessions import Session, SessionBook, Thresholds, session_id
from serving.guard.settings import GuardSettings
from serving.guard.sse import EventSplitter, data_event
from serving.guard.stats import ANONYMOUS, GuardStats
from serving.guard.upstream import (
    BROKEN,
    TOKENIZE_TIMEOUT_S,
    EngineUnreachable,
    Upstream,
    forget_traceback,
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
    fix: ReplyRepair | None = None  # the repairs of this request and its reply
    timing: Timing = field(default_factory=Timing)


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
        self.repairs = Repairs(settings.repair, settings.loop_repeats, self.stats.repairs)
        limits = {key.name: KeyLimit(key.max_parallel, key.priority) for key in settings.keys}
        self.queue = FairQueue(limits, settings.queue_timeout_s, lambda: self.hint.max_num_seqs)
        self.stats.queue = self.queue.figures
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

    async def _proxy(self, scope: Scope, receive: Receive, raw_send: Send) -> None:
        self.stats.count(GuardCounter.REQUESTS)
        draining = self.hint.draining
        if draining is not None:  # before the key: a load balancer's /health has none
            self.stats.count(GuardCounter.DRAIN_REFUSED)
            await send_error(raw_send, errors.draining(draining, self.settings.retry_after_s), [])
            return
        self.stats.in_flight += 1
        try:
            await self._serve(scope, receive, raw_send)
        finally:
            self.stats.in_flight -= 1

    async def _serve(self, scope: Scope, receive: Receive, raw_send: Send) -> None:
        """One request past the drain's door: keys, routes, the body, steered or passed."""
        timing = Timing()
        fixes: list[ReplyRepair] = []

        async def send(message: Message) -> None:
            """Every response start carries the guard's overhead and the repairs made."""
            if message["type"] == "http.response.start":
                marks = [timing.header(), *(fixes[0].headers() if fixes else ())]
                message = {**message, "headers": [*message["headers"], *marks]}
            await raw_send(message)

        key = self._key_of(scope)
        if isinstance(key, GuardError):
            self.stats.count(GuardCounter.UNAUTHORIZED)
            await send_error(send, key, [])
            return
        path = scope["path"]
        if not self.settings.forwards(path):
            self.stats.count(GuardCounter.NOT_FORWARDED)
            await send_error(send, errors.unknown_route(scope["method"], path), [])
            return
        body = await read_body(receive, self._body_limit)
        if body is None:
            await send_error(send, errors.too_large(self.settings.max_body_mib), [])
            return
        if len(self.hint.engines) > 1 and not await self._route(scope, send, body):
            return
        if scope["method"] == "POST" and path in (CHAT, COMPLETIONS):
            try:
                request = request_object(body)
            except BadRequestJson as exc:
                await send_error(send, errors.bad_json(str(exc)), [])
                return
            if request is not None:
                await self._steer(scope, receive, send, request, key, path == CHAT, timing, fixes)
                return
        await self._pass(scope, receive, send, body, key, timing)

    async def _route(self, scope: Scope, send: Send, body: bytes) -> bool:
        """Several engines: pick this request's by its ``model`` (False: answered here).

        ``GET /v1/models`` is answered with every engine's models; a model no engine
        serves gets a 404 ``model_not_found``; no model (or no JSON body): the first engine.
        """
        routes = self.hint.engines
        if scope["method"] == "GET" and scope["path"] == MODELS:
            await self._models(send, routes)
            return False
        model = None
        if scope["method"] == "POST":
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                found = json.loads(body) if body else None
                model = found.get("model") if isinstance(found, dict) else None
        route = route_for(routes, model)
        if route is None:
            self.stats.count(GuardCounter.UNKNOWN_MODEL)
            served = [each.model for each in routes]
            await send_error(send, errors.unknown_model(str(model), served), [])
            return False
        ROUTE.set(route)
        return True

    async def _models(self, send: Send, routes: tuple[EngineRoute, ...]) -> None:
        """Every engine's ``/v1/models`` as one list (one not answering: fleetd's word for it)."""
        answers: list[Any] = []
        for route in routes:
            try:
                answers.append(await self.upstream.get_json(f"{route.url}{MODELS}", 10.0))
            except EngineUnreachable:
                answers.append({"data": [{"id": route.model, "object": "model"}]})
        data = json.dumps(merged_models(answers)).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(data)).encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    def _profile(self) -> tuple[str | None, str | None]:
        """The profile and build of the engine this request goes to (pins, stale sessions)."""
        route = ROUTE.get()
        if route is not None:
            return route.profile, route.build
        return self.hint.profile, self.hint.build

    def _url(self, scope: Scope, path: str | None = None) -> str | None:
        route = ROUTE.get()
        base = route.url if route is not None else self.hint.url
        if base is None:
            return None
        query = scope.get("query_string", b"")
        target = path if path is not None else scope["path"]
        return f"{base}{target}" + (f"?{query.decode('latin-1')}" if query else "")

    def _unavailable(self, reason: str | None) -> GuardError:
        """The 503 for an engine that did not answer, in the words of its state."""
        route = ROUTE.get()
        state = route.state if route is not None else self.hint.state()
        why = STATE_WHY.get(state or "", reason or "nothing answers on the engine's port")
        self.stats.count(GuardCounter.ENGINE_UNAVAILABLE)
        return errors.engine_unavailable(why, self.settings.retry_after_s)

    def _upstream_headers(self, scope: Scope, steered: bool) -> list[tuple[str, str]]:
        drop = set(STEERED_DROP if steered else ())
        if self.keys.enabled:
            drop.add("authorization")  # the guard's key, not the engine's
        return forwarded_headers(scope["headers"], frozenset(drop))

    async def _open(
        self,
        scope: Scope,
        send: Send,
        body: bytes,
        steered: bool,
        extra: list[tuple[bytes, bytes]],
        timing: Timing | None = None,
    ) -> aiohttp.ClientResponse | None:
        """Send upstream; on no answer, the 503 is sent here and None returned."""
        url = self._url(scope)
        if url is None:
            await send_error(send, self._unavailable("fleetd has not named the engine yet"), extra)
            return None
        if timing is not None:
            timing.leave()
        try:
            response = await self.upstream.send(
                url, scope["method"], self._upstream_headers(scope, steered), body
            )
        except EngineUnreachable as exc:
            if timing is not None:
                timing.back()
            await send_error(send, self._unavailable(str(exc)), extra)
            return None
        if timing is not None:
            timing.back()
        return response

    async def _pass(
        self, scope: Scope, receive: Receive, send: Send, body: bytes, key: str, timing: Timing
    ) -> None:
        """Any other request: byte for byte both ways."""
        response = await self._open(scope, send, body, steered=False, extra=[], timing=timing)
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
            try:
                await response.read()
            except BROKEN as exc:
                forget_traceback(exc)
            await send_error(send, self._unavailable("the engine answered 503: not ready"), extra)
            return
        headers = [*returned_headers(response, keep_length=True), *extra]
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        try:
            async for data in response.content.iter_any():
                await send({"type": "http.response.body", "body": data, "more_body": True})
        except BROKEN as exc:  # cut short: the connection ends without a complete body
            forget_traceback(exc)
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
        timing: Timing,
        fixes: list[ReplyRepair],
    ) -> None:
        settings = self.settings
        profile, build = self._profile()
        pins, override = settings.pins_for(profile)
        if apply_pins(request, pins, override, chat):
            self.stats.count(GuardCounter.PINNED)
        steered = Steered(
            request,
            key,
            self.book.touch(
                session_id(request, header(scope, settings.session_header.lower().encode()), key),
                key,
            ),
            ReplyWatch.for_request(request, settings.loop_repeats),
        )
        steered.extra.append((b"x-cmpfleet-session", steered.session.id.encode()))
        steered.timing = timing
        under = runs_under(build, profile, pins)
        fix, refusal = self.repairs.before(request, key, steered.session.id, under)
        fixes.append(fix)
        steered.fix = fix
        if fix.record.stale and not fix.record.told:
            fix.record.told = True
            self.book.note(steered.session, "stale", self.repairs.stale_news(fix) or "", 1)
        if refusal is not None:
            self.stats.count(GuardCounter.STALE_REFUSED)
            await send_error(send, refusal, steered.extra)
            return
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
                self.stats.count(GuardCounter.CAP_REFUSED)
                # Refused: the engine never saw it, so the session is no deeper than before
                # (its depth, and a GuardSessionDeep page, come only from what was served).
                self.book.observe(steered.session, None, ())
                tokens = steered.cap.tokens or 0
                error = errors.over_cap(tokens, settings.max_context_tokens)
                await send_error(send, error, steered.extra)
                return
            if steered.cap.action is CapAction.WARN:
                self.stats.count(GuardCounter.CAP_WARNED)
                steered.extra.append(
                    (
                        b"x-cmpfleet-context-warning",
                        f"{steered.cap.tokens} tokens, over the cap of "
                        f"{settings.max_context_tokens}: compact or start a new session".encode(),
                    )
                )
        admitted = False
        if self.queue.active:
            timing.leave()
            try:
                admitted = await self._queued(receive, key)
            except QueueTimeout as exc:
                timing.back()
                self.stats.count(GuardCounter.QUEUE_REFUSED)
                await send_error(send, queue_full(str(exc), settings.retry_after_s), steered.extra)
                return
            timing.back()
            if not admitted:
                return  # the client hung up while it waited: nothing reaches the engine
        try:
            await self._forward(scope, receive, send, steered)
        finally:
            if admitted:
                self.queue.release(key)

    async def _queued(self, receive: Receive, key: str) -> bool:
        """A slot in the fair queue (True), or the client hung up while it waited (False)."""
        if self.queue.try_acquire(key):
            return True
        slot = asyncio.ensure_future(self.queue.acquire(key))
        gone = asyncio.ensure_future(receive())  # the body is read: only a hang-up comes
        done, _ = await asyncio.wait({slot, gone}, return_when=asyncio.FIRST_COMPLETED)
        if slot in done:
            gone.cancel()
            slot.result()  # QueueTimeout goes up
            return True
        slot.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await slot
        return False

    async def _forward(self, scope: Scope, receive: Receive, send: Send, steered: Steered) -> None:
        """The steered request to the engine and its reply back (one engine slot)."""
        response = await self._open(
            scope,
            send,
            json.dumps(steered.request).encode(),
            steered=True,
            extra=steered.extra,
            timing=steered.timing,
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
                lost = await self._relay_stream(scope, send, response, steered)
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
        if "messages" not in request and token_ids(request.get("prompt")) is not None:
            return judge(prompt_chars(request), cap, self.settings.cap_mode, "token_ids")
        if url is not None:
            try:
                answer = await self.upstream.post_json(
                    url, tokenize_body(request, _model(request)), TOKENIZE_TIMEOUT_S
                )
                count = answer.get("count") if isinstance(answer, dict) else None
                if isinstance(count, int):
                    count = max(count, rendered_tokens(request))
                    return judge(count, cap, self.settings.cap_mode, "tokenize")
            except EngineUnreachable:
                pass
        self.stats.count(GuardCounter.CAP_ESTIMATED)
        tokens = fallback_tokens(request, self.book.depth(steered.session.id))
        return judge(tokens, cap, self.settings.cap_mode, "estimate")

    async def _relay_stream(
        self, scope: Scope, send: Send, response: aiohttp.ClientResponse, steered: Steered
    ) -> str | None:
        """Relay SSE events as they come; None when the stream ended with ``[DONE]``."""
        headers = [*returned_headers(response, keep_length=False), *steered.extra]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        lost, fixer = await self._relay_events(send, response, steered)
        if fixer.looping and steered.fix is not None and steered.fix.cut:
            lost = await self._cut(scope, send, response, steered, fixer)
            return lost
        if steered.hung_up.is_set():
            return "the client hung up"  # not the engine's doing: no error event, no count
        if not fixer.done:
            lost = lost or "the engine closed the connection"
            self.stats.count(GuardCounter.STREAMS_LOST)
            event = b"".join([*fixer.flush(), errors.stream_lost(lost).event()])
            with contextlib.suppress(Exception):
                await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return lost

    async def _relay_events(
        self, send: Send, response: aiohttp.ClientResponse, steered: Steered
    ) -> tuple[str | None, StreamFixer]:
        """The engine's events to the client, through the repairs, until the end or a loop."""
        mode = self.settings.mirror_reasoning
        fix = steered.fix
        assert fix is not None  # noqa: S101 (``_steer`` sets it before anything is forwarded)
        fixer = StreamFixer(self.repairs, fix, steered.watch)
        cut = fix.cut
        splitter = EventSplitter()
        mirrored = False
        lost: str | None = None
        try:
            async for data in response.content.iter_any():
                out: list[bytes] = []
                for event in splitter.feed(data):
                    sent, chunk = fixer.event(event)
                    if chunk is not None:
                        if (
                            steered.strip_usage
                            and chunk.get("choices") == []
                            and chunk.get("usage")
                        ):
                            continue
                        if sent and mode and mirror_choices(chunk, mode, "delta"):
                            mirrored = True
                            sent = [*sent[:-1], data_event(chunk)]
                    out.extend(sent)
                    if cut and fixer.looping:
                        break
                if out:
                    await send(
                        {"type": "http.response.body", "body": b"".join(out), "more_body": True}
                    )
                if cut and fixer.looping:
                    break
        except BROKEN as exc:
            lost = str(exc) or type(exc).__name__
            forget_traceback(exc)
        if mirrored:
            self.stats.count(GuardCounter.MIRRORED)
        return lost, fixer

    async def _cut(
        self,
        scope: Scope,
        send: Send,
        response: aiohttp.ClientResponse,
        steered: Steered,
        fixer: StreamFixer,
    ) -> str | None:
        """A looping stream: the engine's request cancelled, a nudge or a clean end."""
        response.close()  # the engine sees the hang-up and aborts: its slot is free at once
        fix = steered.fix
        assert fix is not None  # noqa: S101 (only a repaired stream is cut)
        depth = self.book.depth(steered.session.id) or 0
        self.stats.count(GuardCounter.LOOPS_CUT)
        nudge = self.repairs.loop_cut(fix)
        loops = fix.loops
        said = loops.text if loops is not None else ""
        line = (loops.found or "") if loops is not None else ""
        self.book.note(
            steered.session,
            "loop_cut",
            f"session {steered.session.id} ({steered.key}): loop cut at {depth} tokens deep "
            f"({line[:80]!r} repeated)" + ("; nudged with 'continue'" if nudge else ""),
            depth,
        )
        url = self._url(scope)
        if nudge and url is not None:
            again = json.dumps(nudged_request(steered.request, said)).encode()
            try:
                retry = await self.upstream.send(
                    url, "POST", self._upstream_headers(scope, True), again
                )
            except EngineUnreachable:
                retry = None  # no nudge to stream: the clean end below
            if retry is not None and retry.status == 200:
                try:
                    fix.loops = None  # the nudged reply is not cut again
                    lost, again_fixer = await self._relay_events(send, retry, steered)
                finally:
                    retry.release()
                if again_fixer.done:
                    await send({"type": "http.response.body", "body": b""})
                    return lost
            elif retry is not None:
                retry.release()
        body = b"".join(fixer.cut_events())
        await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return None

    async def _relay_whole(
        self, send: Send, response: aiohttp.ClientResponse, steered: Steered
    ) -> str | None:
        """A whole JSON reply: read, watched, mirrored, sent; the reason when it broke off."""
        try:
            raw = await response.read()
        except BROKEN as exc:
            forget_traceback(exc)
            await send_error(send, errors.bad_gateway(str(exc), self.settings.retry_after_s), [])
            return str(exc)
        body = _json_object(raw)
        if body is not None:
            steered.watch.whole(body)
            changed = steered.fix is not None and self.repairs.whole(
                steered.fix, body, steered.request
            )
            if mirror_choices(body, self.settings.mirror_reasoning, "message"):
                self.stats.count(GuardCounter.MIRRORED)
                changed = True
            if changed:
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
    except (ValueError, RecursionError):  # the engine's answer, relayed as it came
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
