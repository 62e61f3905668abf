"""Rendered documents shared by every reader: the status JSON and the /metrics text.

Building the status document reads the monitor, the engine and a few store rows (about
5 ms of CPU); the /metrics text costs as much. Done per request, 50 dashboards, ``top``
views and scrapers queue behind one another, and behind them the poll thread waits for
the GIL (the poll jitter grows). So each document is rendered once and its bytes are
served to every reader until it is older than ``max_age_s`` or ``invalidate`` is called
(the daemon calls it after each poll; the app after each mutating request, so a client
that POSTs and then GETs sees its own change).

Renders are single-flight: while one is running, every reader awaits that one render
instead of starting another. A render runs on the thread pool, never on the event loop.
A render that began before an invalidation is not served after it (generations).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# A render this young is served as it is: well under the 1 s poll interval and the
# dashboard's 1 s stream, and it bounds renders to a few per second.
MAX_AGE_S = 0.2
# Up to this age it is still served while one fresh render runs in the background, so
# readers arriving in a steady stream never wait on the clock (only after a change);
# an older one (a reader after a quiet spell) makes the reader wait for a fresh render.
STALE_S = 0.5


@dataclass(frozen=True, slots=True)
class Rendered:
    """One render: its bytes, when it began (monotonic) and the generation it saw."""

    body: bytes
    began_s: float
    generation: int


class RenderedDocument:
    """The latest render of one document, refreshed on demand, one render at a time."""

    def __init__(
        self, render: Callable[[], bytes], max_age_s: float = MAX_AGE_S, stale_s: float = STALE_S
    ) -> None:
        self._render = render
        self._max_age_s = max_age_s
        self._stale_s = max(stale_s, max_age_s)
        self._generation = 0
        self._generation_lock = threading.Lock()  # invalidate() comes from daemon threads
        self._latest: Rendered | None = None
        self._in_flight: asyncio.Future[Rendered] | None = None
        self._in_flight_generation = -1
        self._in_flight_loop: asyncio.AbstractEventLoop | None = None

    def invalidate(self) -> None:
        """The state changed: the next reader gets a render begun after this call."""
        with self._generation_lock:
            self._generation += 1

    async def get(self) -> bytes:
        """The current bytes: the cached render when fresh, else the one in flight or a new one.

        Never a render begun before the last ``invalidate``; one between ``max_age_s`` and
        ``stale_s`` old is served while a fresh one is started for the next readers.
        """
        generation = self._generation
        latest = self._latest
        loop = asyncio.get_running_loop()
        if latest is not None and latest.generation == generation:
            age_s = time.monotonic() - latest.began_s
            if age_s < self._max_age_s:
                return latest.body
            if age_s < self._stale_s:
                self._flight(generation, loop)
                return latest.body
        # shield: a reader that goes away must not cancel the render others await.
        return (await asyncio.shield(self._flight(generation, loop))).body

    def _flight(self, generation: int, loop: asyncio.AbstractEventLoop) -> asyncio.Future[Rendered]:
        """The render in flight for ``generation`` on this loop, started when there is none."""
        flight = self._in_flight
        # A flight of another loop (a test client's, now closed) is never awaited here.
        if (
            flight is None
            or self._in_flight_generation != generation
            or self._in_flight_loop is not loop
        ):
            flight = self._in_flight = loop.create_task(self._render_now(generation))
            flight.add_done_callback(_retrieve)  # a background render's failure is not news
            self._in_flight_generation, self._in_flight_loop = generation, loop
        return flight

    async def _render_now(self, generation: int) -> Rendered:
        began_s = time.monotonic()
        try:
            body = await run_in_threadpool(self._render)
        finally:
            if self._in_flight_generation == generation:
                self._in_flight, self._in_flight_generation, self._in_flight_loop = None, -1, None
        rendered = Rendered(body, began_s, generation)
        if self._latest is None or self._latest.began_s <= began_s:
            self._latest = rendered
        return rendered


def _retrieve(task: asyncio.Future[Rendered]) -> None:
    """Mark a render's exception as seen: its readers got it; a background one had none."""
    if not task.cancelled():
        task.exception()


class RenderedDocuments:
    """The app's rendered documents by name; ``invalidate_rendered`` reaches them all."""

    def __init__(self) -> None:
        self._documents: dict[str, RenderedDocument] = {}

    def add(self, name: str, render: Callable[[], bytes]) -> RenderedDocument:
        """Register (or replace) one document."""
        document = self._documents[name] = RenderedDocument(render)
        return document

    def invalidate(self) -> None:
        """Every document is re-rendered for its next reader."""
        for document in tuple(self._documents.values()):
            document.invalidate()


def rendered_documents(app: FastAPI) -> RenderedDocuments:
    """The app's registry (created on first use)."""
    documents = getattr(app.state, "rendered_documents", None)
    if not isinstance(documents, RenderedDocuments):
        documents = app.state.rendered_documents = RenderedDocuments()
    return documents


def invalidate_rendered(app: FastAPI) -> None:
    """The daemon's state changed (a poll ended): readers get fresh documents."""
    rendered_documents(app).invalidate()


NON_MUTATING_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class InvalidateOnMutation:
    """After a POST (or any non-read) has run, rendered documents are re-rendered (plain ASGI).

    It fires as the response starts, after the route did its work and before the client
    can read the answer, so the client's next GET never sees the state from before.
    """

    def __init__(self, app: ASGIApp, invalidate: Callable[[], None]) -> None:
        self.app = app
        self.invalidate = invalidate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; invalidate when a non-read request's response starts."""
        if scope["type"] != "http" or scope["method"] in NON_MUTATING_METHODS:
            await self.app(scope, receive, send)
            return

        async def send_after_invalidating(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.invalidate()
            await send(message)

        await self.app(scope, receive, send_after_invalidating)
