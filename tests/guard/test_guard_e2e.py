"""The traffic guard end to end: a real fleetd with ``[guard]``, its guard process and the
simulated engine behind it, driven over HTTP as an agent would.

One fleetd on the healthy cards with the reference build's reasoning field (``reasoning``
only, so the mirror has work), a client key, pins and a small cap; one on
``engine-corrupt`` for the DSML leak counter. The engine is the simulated one (a real
process, real HTTP, real signals); nothing is patched.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import pytest

from serving.guard.keys import hash_key, new_key
from tests.support import loopback
from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, free_port, start_fleetd, stop_all, wait_until

pytestmark = pytest.mark.slow(seconds=15)

MODEL = "dsv4s"
TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}


class Rig:
    """A fleetd with a guard: where to call, with which key."""

    def __init__(self, daemon: Fleetd, guard_port: int, key: str | None) -> None:
        self.daemon = daemon
        self.guard = f"http://127.0.0.1:{guard_port}"
        self.key = key

    def headers(self, key: str | None = "auto") -> dict[str, str]:
        chosen = self.key if key == "auto" else key
        return {} if chosen is None else {"Authorization": f"Bearer {chosen}"}

    def chat(self, body: dict[str, Any], key: str | None = "auto") -> httpx.Response:
        return loopback.post(
            f"{self.guard}/v1/chat/completions",
            json={"model": MODEL, **body},
            headers=self.headers(key),
        )

    def serving(self) -> dict[str, Any]:
        result: dict[str, Any] = self.daemon.get("/api/v1/status").json()["serving"]
        return result

    def engine_url(self) -> str:
        return str(self.serving()["url"])

    def metric(self, name: str) -> float:
        for line in self.daemon.get("/metrics").text.splitlines():
            if line.split(" ")[0] == name:
                return float(line.rsplit(" ", 1)[1])
        return 0.0


def _scenario(tmp: Path, name: str, engine: str) -> Path:
    text = (resources.files("hwcheck.sim") / "scenarios" / f"{name}.toml").read_text("utf-8")
    path = tmp / f"{name}-guarded.toml"
    path.write_text(text + "\n" + engine, encoding="utf-8")
    return path


def _start(tmp: Path, scenario: Path, guard: str, name: str) -> tuple[Fleetd, int]:
    port = free_port()
    config = tmp / f"{name}.toml"
    config.write_text(
        f"""
[recovery]
backoff_base_s = 0.5
backoff_max_s = 1.0
[canary]
enabled = false  # the engine's only requests are the test's
[guard]
listen = "127.0.0.1:{port}"
{guard}
""",
        encoding="utf-8",
    )
    daemon = start_fleetd(tmp, tmp / f"state-{name}", simulate=str(scenario), config=config)
    return daemon, port


def _wait_ready(rig: Rig) -> None:
    wait_until(lambda: rig.serving()["state"] == "ready", 30, "the engine ready")
    wait_until(
        lambda: rig.daemon.get("/api/v1/guard").json()["up"], 15, "the guard answering fleetd"
    )


@pytest.fixture(scope="module")
def rigs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Rig, Rig]]:
    """Both fleetds, started side by side (each start waits mostly on its engine)."""
    tmp = tmp_path_factory.mktemp("guard")
    key = new_key()
    healthy = _scenario(
        tmp, "healthy", '[engine]\nreasoning_field = "reasoning"\ntokens_per_s = 100\n'
    )
    guard = f"""max_context_tokens = 60
mirror_reasoning = "reasoning_content"
[guard.pin]
chat_template_kwargs = {{ thinking = true, reasoning_effort = "max" }}
[[guard.keys]]
name = "laptop"
sha256 = "{hash_key(key)}"
"""
    corrupt_scenario = _scenario(tmp, "engine-corrupt", "")
    started: dict[str, tuple[Fleetd, int]] = {}
    failures: list[BaseException] = []

    def start(name: str, scenario: Path, section: str) -> None:
        try:
            started[name] = _start(tmp, scenario, section, name)
        except BaseException as exc:
            failures.append(exc)

    threads = [
        threading.Thread(target=start, args=("healthy", healthy, guard)),
        threading.Thread(target=start, args=("corrupt", corrupt_scenario, "")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        if failures:
            raise failures[0]
        pair = (Rig(*started["healthy"], key), Rig(*started["corrupt"], None))
        for each in pair:
            _wait_ready(each)
        yield pair
    finally:
        stop_all([daemon for daemon, _ in started.values()])


@pytest.fixture
def rig(rigs: tuple[Rig, Rig]) -> Rig:
    """The healthy rig: reference build's reasoning field, a key, pins, a 60-token cap."""
    return rigs[0]


@pytest.fixture
def corrupt(rigs: tuple[Rig, Rig]) -> Rig:
    """The engine-corrupt rig: tool calls leak as raw DSML."""
    return rigs[1]


def _events(response: httpx.Response) -> Iterator[dict[str, Any] | str]:
    for line in response.iter_lines():
        if line.startswith("data: "):
            payload = line[len("data: ") :]
            yield payload if payload == "[DONE]" else json.loads(payload)


def _stream(rig: Rig, client: httpx.Client, body: dict[str, Any]) -> Any:
    return client.stream(
        "POST",
        f"{rig.guard}/v1/chat/completions",
        json={"model": MODEL, "stream": True, **body},
        headers=rig.headers(),
    )


def test_a_stream_arrives_chunk_by_chunk_pinned_and_mirrored(rig: Rig) -> None:
    engine = rig.engine_url()
    body = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 150}
    with httpx.Client(timeout=30, trust_env=False) as client, _stream(rig, client, body) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        events = _events(reply)
        reasoning = [next(events) for _ in range(3)][1:]
        # A chunk came through while the engine still generates: relayed, not buffered.
        running = loopback.get(f"{engine}/metrics").text
        assert 'vllm:num_requests_running{model_name="dsv4s"} 1.0' in running
        rest = list(events)
    assert rest[-1] == "[DONE]"
    chunks = [event for event in [*reasoning, *rest] if isinstance(event, dict)]
    assert all(
        chunk["choices"] for chunk in chunks
    )  # the usage chunk the guard asked for is not shown
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks]
    thoughts = [d for d in deltas if "reasoning" in d]
    assert thoughts
    assert all(d["reasoning_content"] == d["reasoning"] for d in thoughts)  # mirrored
    assert sum(1 for d in deltas if d.get("content")) > 10  # token by token
    seen = loopback.get(f"{engine}/sim/last-request").json()["body"]
    assert seen["chat_template_kwargs"] == {"thinking": True, "reasoning_effort": "max"}
    assert "Authorization" not in json.dumps(seen)
    whole = rig.chat({"messages": [{"role": "user", "content": "Hi."}]})
    message = whole.json()["choices"][0]["message"]
    assert message["reasoning_content"] == message["reasoning"]


def test_a_prompt_over_the_cap_gets_openais_400(rig: Rig) -> None:
    long = " ".join(["abc"] * 80)  # 319 characters: 80 tokens to the simulated tokenizer
    answer = rig.chat({"messages": [{"role": "user", "content": long}]})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert "80 tokens" in error["message"]
    assert "60" in error["message"]
    assert "new session" in error["message"]
    wait_until(
        lambda: rig.metric("cmpfleet_guard_context_refused_total") >= 1, 10, "the cap's counter"
    )
    # Refused before the engine: the session is no deeper for it (no GuardSessionDeep).
    session = answer.headers["x-cmpfleet-session"]

    def listed() -> dict[str, Any] | None:
        rows = rig.daemon.get("/api/v1/guard").json()["sessions"]
        return next((row for row in rows if row["id"] == session), None)

    wait_until(lambda: listed() is not None, 10, "the refused session in the guard's panel")
    row = listed()
    assert row is not None and row["depth_tokens"] == 0, row
    # The status names the guard: where it listens, that it is up, what it refused.
    guard = rig.daemon.get("/api/v1/status").json()["serving"]["guard"]
    assert guard["up"] is True and guard["listen"] == rig.guard.removeprefix("http://")
    wait_until(
        lambda: rig.daemon.get("/api/v1/status").json()["serving"]["guard"]["refused"] >= 1,
        10,
        "the refusal in the status",
    )
    shown = run_fleetctl_here("--url", rig.daemon.url, "status")
    assert f"guard: up on {guard['listen']}" in shown.stdout, shown.stdout


def test_keys_are_required_and_usage_is_counted_per_key(rig: Rig) -> None:
    def laptop_prompt_tokens() -> int:
        rows = rig.daemon.get("/api/v1/guard/usage").json()
        return sum(r["prompt_tokens"] for r in rows if r["key"] == "laptop")

    before = laptop_prompt_tokens()
    missing = rig.chat({"messages": [{"role": "user", "content": "Hi."}]}, key=None)
    assert missing.status_code == 401
    assert missing.json()["error"]["code"] == "invalid_api_key"
    wrong = rig.chat({"messages": [{"role": "user", "content": "Hi."}]}, key=new_key())
    assert wrong.status_code == 401
    assert loopback.get(f"{rig.guard}/v1/models").status_code == 401
    assert loopback.get(f"{rig.guard}/v1/models", headers=rig.headers()).status_code == 200
    assert rig.chat({"messages": [{"role": "user", "content": "Count these words."}]}).is_success
    wait_until(lambda: laptop_prompt_tokens() >= before + 3, 10, "laptop's usage")
    metrics = rig.daemon.get("/metrics").text
    assert 'cmpfleet_guard_tokens_total{key="laptop",kind="prompt"}' in metrics
    assert rig.metric("cmpfleet_guard_unauthorized_total") >= 3
    assert rig.key is not None
    assert rig.key not in rig.daemon.log()
    assert rig.key not in rig.daemon.get("/api/v1/events?limit=1000").text


def test_a_killed_engine_ends_the_stream_cleanly_then_503_until_ready(rig: Rig) -> None:
    # Long enough (2,000 tokens at the simulated pace) that a test stalled by load cannot read
    # the whole stream before its kill. ``ignore_eos``: without it the simulated answer ends
    # at its 25 words whatever max_tokens says, and a loaded run read it all, [DONE] first.
    body = {
        "messages": [{"role": "user", "content": "Go on."}],
        "max_tokens": 2000,
        "ignore_eos": True,
    }
    with httpx.Client(timeout=30, trust_env=False) as client, _stream(rig, client, body) as reply:
        events = _events(reply)
        for _ in range(3):
            next(events)
        os.kill(int(rig.serving()["pid"]), signal.SIGKILL)
        rest = list(events)
    assert "[DONE]" not in rest
    last = rest[-1]
    assert isinstance(last, dict)
    assert last["error"]["code"] == "engine_connection_lost"
    refusals: list[httpx.Response] = []

    def served_again() -> bool:
        answer = rig.chat({"messages": [{"role": "user", "content": "Hi."}]})
        if answer.status_code == 503:
            refusals.append(answer)
        return answer.status_code == 200

    wait_until(served_again, 30, "the guard serving again after the engine's restart")
    assert refusals, "no 503 while the engine was down"
    assert all(r.headers.get("retry-after") for r in refusals)
    assert all(r.json()["error"]["code"] == "engine_unavailable" for r in refusals)


def test_status_and_xids_never_wait_on_32_streams(rig: Rig) -> None:
    _wait_ready(rig)
    finished: list[int] = []
    stop = threading.Event()

    def agent() -> None:
        body = {"messages": [{"role": "user", "content": "Long answer."}], "max_tokens": 400}
        body["ignore_eos"] = True
        with (
            httpx.Client(timeout=60, trust_env=False) as client,
            _stream(rig, client, body) as reply,
        ):
            for _ in reply.iter_lines():
                if stop.is_set():
                    break
        finished.append(1)

    threads = [threading.Thread(target=agent, daemon=True) for _ in range(32)]
    for thread in threads:
        thread.start()
    wait_until(
        lambda: rig.metric("cmpfleet_guard_requests_total") >= 32 or len(finished) > 0,
        20,
        "32 streams through the guard",
    )
    polls_before = rig.metric("cmpfleet_polls_total")
    answer = rig.daemon.post("/api/v1/sim/xid", {"card": 2, "xid": 45})
    assert answer.status_code == 200

    def xid_seen() -> bool:
        events = rig.daemon.get("/api/v1/events?kind=xid").json()
        return any(event["xid"] == 45 for event in events)

    wait_until(xid_seen, 10, "the Xid recorded under load")
    wait_until(
        lambda: rig.metric("cmpfleet_polls_total") >= polls_before + 3, 10, "polls under load"
    )
    assert len(finished) < 32, "the streams ended before the check: no load was measured"
    stop.set()
    for thread in threads:
        thread.join(30)
    assert len(finished) == 32


def test_engine_corrupt_leaks_dsml_and_the_traffic_panel_shows_the_session(corrupt: Rig) -> None:
    body = {"messages": [{"role": "user", "content": "Read /w/a.txt"}], "tools": [TOOL]}
    answer = corrupt.chat(body)
    assert answer.status_code == 200
    assert "DSML" in answer.json()["choices"][0]["message"]["content"]  # passed on unchanged
    session = answer.headers["x-cmpfleet-session"]
    wait_until(
        lambda: (
            corrupt.daemon.get("/metrics").text.count(
                'cmpfleet_guard_reply_signs_total{sign="dsml_markup"} 1.0'
            )
            == 1
        ),
        10,
        "the DSML leak counter on /metrics",
    )
    panel = corrupt.daemon.get("/api/v1/guard").json()
    row = next(s for s in panel["sessions"] if s["id"] == session)
    assert row["signs"] == {"dsml_markup": 1}
    assert row["leaks_last_hour"] == 1
    assert panel["leaks_last_hour"] >= 1
