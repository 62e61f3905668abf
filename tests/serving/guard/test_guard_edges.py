"""The guard's edges as an attacker on the loopback meets them (issue 36).

A real guard process (``python -m serving.guard``) in front of the simulated engine (a
real process, real HTTP), driven over raw sockets and httpx: bounded heads and
connections, the route allow-list, sessions scoped by key, the cap on token-ID prompts and
rendered fields, and OpenAI-shaped errors. A pooled connection the engine resets is met
with a small fake engine at the HTTP boundary (the reset has to come at a chosen moment).
"""

from __future__ import annotations

import contextlib
import gc
import json
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from aiohttp import client_reqrep

from serving.guard.app import GuardApp, Steered
from serving.guard.keys import hash_key, new_key
from serving.guard.settings import GuardSettings
from tests.support import loopback
from tests.support.engine_helpers import SERVED_NAME, free_port, kill_group, sim_argv
from tests.support.guardproc import GuardProc, openai_error, running_guard
from tests.support.waiting import DEADLINE_SCALE, wait_until

pytestmark = pytest.mark.slow(seconds=10)

HEADER_TIMEOUT_S = 1.0
ALICE, BOB = new_key(), new_key()


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    """The simulated engine at 20 tokens/s (a 40-token stream takes about 2 s)."""
    port = free_port()
    argv = sim_argv(port, "--sim-tokens-per-s", "20", ready_after_s=0)
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return loopback.get(f"{url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(ready, 30, "the simulated engine ready")
        yield url
    finally:
        kill_group(proc.pid)
        proc.wait()


@pytest.fixture(scope="module")
def guard(engine: str) -> Iterator[GuardProc]:
    """Keys for alice and bob, a 60-token cap, short header and idle timeouts."""
    settings = {
        "listen": "127.0.0.1:0",
        "max_context_tokens": 60,
        "header_timeout_s": HEADER_TIMEOUT_S,
        "idle_timeout_s": 1,
        "keys": [
            {"name": "alice", "sha256": hash_key(ALICE)},
            {"name": "bob", "sha256": hash_key(BOB)},
        ],
    }
    with running_guard(settings, engine) as running:
        yield running


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _chat(
    guard: GuardProc, body: dict[str, Any], key: str = ALICE, **headers: str
) -> httpx.Response:
    return loopback.post(
        f"{guard.url}/v1/chat/completions",
        json={"model": SERVED_NAME, **body},
        headers={**_auth(key), **headers},
    )


def _closed_within(sock: socket.socket, limit_s: float) -> bool:
    """True when the guard closes ``sock`` (an empty read, or a reset) within ``limit_s``."""
    sock.settimeout(limit_s)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


# -- bounded heads and connections -------------------------------------------------------
def test_a_64_mib_head_gets_431_at_once_while_health_answers(guard: GuardProc) -> None:
    """The guard answers once the head passes its limit, never after reading all of it.

    What proves it is how much of the 64 MiB got through before the answer (the limit plus
    the loopback socket buffers), not a wall-clock figure: a loaded machine took 1.00 s. The
    time bounds are the suite's stretched deadlines, for a guard that stalls outright.
    """
    chunk = b"a" * (1024 * 1024)
    sock = guard.connect()
    sent_bytes = [0]
    sent_s = time.monotonic()

    def flood() -> None:
        with contextlib.suppress(OSError):  # the guard closed it: what is asked of it
            sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Pad: ")
            for _ in range(64):
                sock.sendall(chunk)
                sent_bytes[0] += len(chunk)

    sender = threading.Thread(target=flood, daemon=True)
    sender.start()
    try:
        sock.settimeout(10 * DEADLINE_SCALE)
        answer = sock.recv(65536)
        answered_s = time.monotonic() - sent_s
        through = sent_bytes[0]
        began_s = time.monotonic()
        health = loopback.get(f"{guard.url}/health", timeout=10)
        health_s = time.monotonic() - began_s
    finally:
        sock.close()
        sender.join(30)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    error = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
    assert error["code"] == "request_header_fields_too_large"
    assert through < 32 * len(chunk), f"{through} bytes of the head went in before the 431"
    assert answered_s < DEADLINE_SCALE, f"the 431 took {answered_s:.2f} s"
    assert health.status_code == 200
    assert health_s < DEADLINE_SCALE, f"/health took {health_s:.2f} s beside a 64 MiB head"


@pytest.mark.parametrize("sent", [b"", b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"])
def test_a_silent_or_half_sent_connection_is_closed_after_the_header_timeout(
    guard: GuardProc, sent: bytes
) -> None:
    with guard.connect() as sock:
        began_s = time.monotonic()
        sock.sendall(sent)
        assert _closed_within(sock, 10 * HEADER_TIMEOUT_S + 10), "still open"
        assert time.monotonic() - began_s >= HEADER_TIMEOUT_S * 0.9


def test_a_flowing_stream_outlives_the_header_and_idle_timeouts(guard: GuardProc) -> None:
    body = {
        "model": SERVED_NAME,
        "stream": True,
        "max_tokens": 40,
        "ignore_eos": True,
        "messages": [{"role": "user", "content": "Go on."}],
    }
    began_s = time.monotonic()
    with (
        httpx.Client(timeout=30, trust_env=False) as client,
        client.stream(
            "POST", f"{guard.url}/v1/chat/completions", json=body, headers=_auth(ALICE)
        ) as reply,
    ):
        assert reply.status_code == 200
        lines = [line for line in reply.iter_lines() if line.startswith("data: ")]
    assert time.monotonic() - began_s > 2 * HEADER_TIMEOUT_S, "too short to show anything"
    assert lines[-1] == "data: [DONE]"
    assert not any('"error"' in line for line in lines)


def test_connections_past_the_cap_get_503_and_the_guard_lives(engine: str) -> None:
    with running_guard({"listen": "127.0.0.1:0", "max_connections": 4}, engine) as guard:
        idle = [guard.connect() for _ in range(200)]
        refused: list[httpx.Response] = []

        def refused_past_the_cap() -> bool:
            answer = loopback.get(f"{guard.url}/health")
            refused.append(answer)
            return answer.status_code == 503

        try:
            wait_until(refused_past_the_cap, 10, "a 503 past the cap")
            assert openai_error(refused[-1])["code"] == "too_many_connections"
            assert refused[-1].headers["retry-after"] == "10"
        finally:
            for sock in idle:
                sock.close()
        wait_until(
            lambda: loopback.get(f"{guard.url}/health").status_code == 200,
            30,
            "the guard serving again",
        )
        assert guard.proc.poll() is None


# -- what is forwarded, to whom ----------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/sim/last-request"), ("GET", "/metrics"), ("GET", "/version"), ("POST", "/x")],
)
def test_routes_off_the_allow_list_get_openais_404(
    guard: GuardProc, method: str, path: str
) -> None:
    answer = loopback.request(method, f"{guard.url}{path}", headers=_auth(ALICE))
    assert answer.status_code == 404
    error = openai_error(answer)
    assert error["code"] == "unknown_url"
    assert path in error["message"]
    # Without a key: the key's 401 first (the routes are not shown to strangers).
    assert loopback.request(method, f"{guard.url}{path}").status_code == 401


def test_the_allow_list_is_configurable(engine: str) -> None:
    settings = {"listen": "127.0.0.1:0", "routes": ["/v1/models", "/sim/*"]}
    with running_guard(settings, engine) as guard:
        assert loopback.get(f"{guard.url}/sim/last-request").status_code == 200
        assert loopback.get(f"{guard.url}/v1/models").status_code == 200
        assert loopback.get(f"{guard.url}/health").status_code == 404


def test_sessions_are_scoped_by_key(guard: GuardProc) -> None:
    body = {"messages": [{"role": "user", "content": "Same words."}], "max_tokens": 4}
    alice = _chat(guard, body, ALICE, **{"x-session-id": "conv-1"})
    bob = _chat(guard, body, BOB, **{"x-session-id": "conv-1"})
    assert alice.status_code == bob.status_code == 200
    assert alice.headers["x-cmpfleet-session"] != bob.headers["x-cmpfleet-session"]
    unnamed = [_chat(guard, body, key).headers["x-cmpfleet-session"] for key in (ALICE, BOB)]
    assert unnamed[0] != unnamed[1]
    sessions = guard.sync(None).get("sessions") or []
    keys_of = {row["id"]: row["key"] for row in sessions}
    assert keys_of[alice.headers["x-cmpfleet-session"]] == "alice"
    assert keys_of[bob.headers["x-cmpfleet-session"]] == "bob"


# -- the cap -----------------------------------------------------------------------------
def test_a_token_id_prompt_over_the_cap_gets_the_caps_400(guard: GuardProc) -> None:
    answer = loopback.post(
        f"{guard.url}/v1/completions",
        json={"model": SERVED_NAME, "prompt": list(range(100)), "max_tokens": 4},
        headers=_auth(ALICE),
    )
    assert answer.status_code == 400
    error = openai_error(answer)
    assert error["code"] == "context_length_exceeded"
    assert "100 tokens" in error["message"]


def test_documents_count_toward_the_cap(guard: GuardProc) -> None:
    documents = [{"title": "notes", "text": " ".join(["word"] * 400)}]
    answer = _chat(
        guard,
        {"messages": [{"role": "user", "content": "Sum up."}], "documents": documents},
    )
    assert answer.status_code == 400
    assert openai_error(answer)["code"] == "context_length_exceeded"


# -- errors in OpenAI's shape ------------------------------------------------------------
@pytest.mark.parametrize(
    "raw",
    [
        b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"messages": [], "temperature": NaN}',
        b'{"messages": [], "temperature": 1e400}',
        b'{"messages": [], "top_p": -Infinity}',
    ],
    ids=["deep", "nan", "1e400", "infinity"],
)
def test_json_the_guard_cannot_resend_is_a_400(guard: GuardProc, raw: bytes) -> None:
    answer = loopback.post(
        f"{guard.url}/v1/chat/completions",
        content=raw,
        headers={**_auth(ALICE), "Content-Type": "application/json"},
    )
    assert answer.status_code == 400, answer.text[:300]
    assert openai_error(answer)["code"] == "invalid_json"


def test_an_engine_4xx_passes_through_and_is_no_outage(guard: GuardProc) -> None:
    before = guard.counters()
    answer = _chat(guard, {"model": "nope", "messages": [{"role": "user", "content": "Hi."}]})
    assert answer.status_code == 404
    assert "does not exist" in answer.json()["error"]["message"]
    after = guard.counters()
    for name in ("engine_unavailable", "streams_lost"):
        assert after.get(name, 0) == before.get(name, 0), name


class ResettingEngine:
    """A fake engine at the HTTP boundary: each connection answers its first request, then
    resets on the next without reading or answering it, as an engine closing a kept-alive
    connection the guard has just written to. ``refuse_after_reset``: then it stops
    listening too (the retry finds nobody)."""

    def __init__(self, refuse_after_reset: bool) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.refuse_after_reset = refuse_after_reset
        self.connections = 0
        self.answered = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                received += chunk
            body = b'{"object": "list", "data": []}'
            self.answered += 1  # before the answer: the test reads it once answered
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                + f"content-length: {len(body)}\r\n\r\n".encode()
                + body
            )
            if not conn.recv(65536):  # the next request on this connection: reset, unread
                return
            if self.refuse_after_reset:
                self.close()
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes accept(): nobody listens now
        self.listener.close()


@pytest.mark.parametrize("refuse", [False, True], ids=["retried", "then-down"])
def test_a_reset_pooled_connection_is_retried_once_then_503(refuse: bool) -> None:
    fake = ResettingEngine(refuse_after_reset=refuse)
    try:
        with running_guard({"listen": "127.0.0.1:0"}, fake.url) as guard:
            with httpx.Client(timeout=10, trust_env=False) as client:
                assert client.get(f"{guard.url}/v1/models").status_code == 200
                second = client.get(f"{guard.url}/v1/models")
            if refuse:
                assert second.status_code == 503, second.text
                assert second.headers["retry-after"]
                assert openai_error(second)["code"] == "engine_unavailable"
            else:
                assert second.status_code == 200, second.text
                assert fake.answered == 2
                assert fake.connections == 2  # the pooled one, then one fresh retry
    finally:
        fake.close()


# -- memory per aborted stream -----------------------------------------------------------
def _alive(kind: type) -> int:
    gc.collect()
    return sum(1 for item in gc.get_objects() if isinstance(item, kind))


def test_an_aborted_stream_keeps_nothing(engine: str) -> None:
    """Each abort used to leave its frames, request and response reachable from aiohttp's
    one shared "Connection closed" error (about 13 KB an abort; ``bench/guard_aborts.py``
    shows RSS over 5,000). Here the guard runs in this process, so what it keeps is seen."""
    port = free_port()
    app = GuardApp(GuardSettings(listen=f"127.0.0.1:{port}"), None, "token", engine)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on", log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 30, "the in-process guard serving")
        body = {
            "model": SERVED_NAME,
            "stream": True,
            "max_tokens": 400,
            "ignore_eos": True,
            "messages": [{"role": "user", "content": "Go on."}],
        }
        for _ in range(30):
            with (
                httpx.Client(timeout=30, trust_env=False) as client,
                client.stream(
                    "POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body
                ) as reply,
            ):
                next(reply.iter_lines())  # the first event, then hang up
        wait_until(lambda: _alive(Steered) == 0, 30, "every aborted stream's state released")
        shared = client_reqrep._CONNECTION_CLOSED_EXCEPTION
        assert shared.__traceback__ is None
    finally:
        server.should_exit = True
        thread.join(30)
