"""The control socket: fleetd tells the guard where the engine is and reads its counters.

One route, ``POST /guard/sync`` on a loopback socket only fleetd holds, with a token only
fleetd knows (given in the guard's environment): fleetd sends the engine's URL, its
state and the profile in force (the pins are per profile) each poll, and gets back the
counters, the usage per key and hour, the recent sessions and the news since the last
sync. A state older than ``HINT_STALE_S`` is not used to explain a 503 (fleetd may be gone).
A drain (``draining``: why) is not: the guard answers 503 to everything until fleetd ends it.
"""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from serving.guard.routing import EngineRoute, parse_routes
from serving.guard.stats import GuardStats

SYNC_PATH = "/guard/sync"
HINT_STALE_S = 30.0
MAX_SYNC_BYTES = 64 * 1024


@dataclass
class EngineHint:
    """What fleetd last said about the engine."""

    url: str | None = None
    serving_state: str | None = None
    profile: str | None = None
    build: str | None = None  # the running launch's recipe hash (stale sessions)
    max_num_seqs: int | None = None  # the engine's slots (the fair queue's capacity)
    draining: str | None = None  # fleetd drains this rig: why, in one line (None: not draining)
    engines: tuple[EngineRoute, ...] = ()  # several engines: routed by model (``routing``)
    at_s: float = field(default_factory=time.monotonic)

    def state(self) -> str | None:
        """The engine's state, unless fleetd has not said it lately."""
        if time.monotonic() - self.at_s > HINT_STALE_S:
            return None
        return self.serving_state

    def update(self, document: dict[str, Any]) -> None:
        """Take fleetd's sync document (unknown keys ignored)."""
        url = document.get("engine_url")
        if isinstance(url, str) and url.startswith("http"):
            self.url = url.rstrip("/")
        state = document.get("serving_state")
        self.serving_state = state if isinstance(state, str) else None
        profile = document.get("profile")
        self.profile = profile if isinstance(profile, str) else None
        build = document.get("build")
        self.build = build if isinstance(build, str) else None
        seqs = document.get("max_num_seqs")
        self.max_num_seqs = seqs if isinstance(seqs, int) and seqs > 0 else None
        # Kept even when the hint goes stale: a drained rig stays out until fleetd says so.
        draining = document.get("draining")
        self.draining = draining if isinstance(draining, str) and draining else None
        self.engines = parse_routes(document.get("engines"))
        self.at_s = time.monotonic()


class Synced(Protocol):
    """The guard as its control socket reaches it (``serving.guard.app.GuardApp``).

    Declared here, not imported: the guard's app routes the control socket here, so this
    names only what a sync touches: the engine hint it updates and the counters it answers.
    """

    @property
    def hint(self) -> EngineHint:
        """What fleetd last said about the engine."""
        ...

    @property
    def stats(self) -> GuardStats:
        """The guard's counters, usage and sessions."""
        ...


async def _answer(
    send: Callable[[MutableMapping[str, Any]], Awaitable[None]], status: int, body: Any
) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


async def handle_control(
    app: Synced,
    scope: MutableMapping[str, Any],
    receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
    send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    token: str,
) -> None:
    """``POST /guard/sync``: take fleetd's hint, answer the counters."""
    given = ""
    for name, value in scope["headers"]:
        if name == b"authorization":
            given = value.decode("latin-1").removeprefix("Bearer ").strip()
    if not hmac.compare_digest(given.encode(), token.encode()):
        await _answer(send, 403, {"error": "wrong control token"})
        return
    if scope["method"] != "POST" or scope["path"] != SYNC_PATH:
        await _answer(send, 404, {"error": f"no route {scope['path']}"})
        return
    raw = b""
    while True:
        message = await receive()
        raw += message.get("body", b"")
        if len(raw) > MAX_SYNC_BYTES:
            await _answer(send, 413, {"error": "sync document too large"})
            return
        if message["type"] == "http.disconnect" or not message.get("more_body", False):
            break
    try:
        document = json.loads(raw or b"{}")
    except ValueError:
        document = None
    if not isinstance(document, dict):
        await _answer(send, 400, {"error": "expected a JSON object"})
        return
    app.hint.update(document)
    since = document.get("since_seq", 0)
    answer = app.stats.document(since if isinstance(since, int) else 0)
    # Said in the same answer that took the drain: every request counted in ``in_flight``
    # passed before it, none after, so fleetd knows when the rig is quiet.
    answer["draining"] = app.hint.draining is not None
    await _answer(send, 200, answer)
