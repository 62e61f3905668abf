"""A drained guard (issue 42): every new request and ``/health`` get a 503 ``draining``.

A real guard process in front of the simulated engine (a real process at 20 tokens/s),
told to drain over its control socket as fleetd tells it. What a load balancer needs:
``/health`` answers 503 (so its health check takes the rig out), a new request gets the
same 503 in OpenAI's shape with ``Retry-After`` and never reaches the engine (so retrying
it on another rig is safe), and a stream that began before the drain runs to its end.
The guard's answer to the sync says when it took the drain and how many still run.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator

import httpx
import pytest

from tests.support import loopback
from tests.support.engine_helpers import SERVED_NAME, free_port, kill_group, sim_argv
from tests.support.guardproc import GuardProc, openai_error, running_guard
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow(seconds=5)

WHY = "the host reboots"


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


@pytest.fixture
def guard(engine: str) -> Iterator[GuardProc]:
    with running_guard({"listen": "127.0.0.1:0", "retry_after_s": 7}, engine) as running:
        yield running


def _chat(guard: GuardProc) -> httpx.Response:
    body = {"model": SERVED_NAME, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
    return loopback.post(f"{guard.url}/v1/chat/completions", json=body, timeout=30)


def test_a_drained_guard_answers_503_draining_on_health_and_requests(
    guard: GuardProc, engine: str
) -> None:
    assert loopback.get(f"{guard.url}/health").status_code == 200
    assert _chat(guard).status_code == 200
    served = guard.sync(engine)["counters"].get("engine_unavailable", 0)

    report = guard.sync(engine, draining=WHY)
    assert report["draining"] is True and report["in_flight"] == 0

    health = loopback.get(f"{guard.url}/health")
    assert health.status_code == 503
    assert openai_error(health)["code"] == "draining"
    assert WHY in openai_error(health)["message"]
    chat = _chat(guard)
    assert chat.status_code == 503
    assert chat.headers["retry-after"] == "7"
    assert openai_error(chat)["code"] == "draining"
    counters = guard.sync(engine, draining=WHY)["counters"]
    assert counters["drain_refused"] == 2
    assert counters.get("engine_unavailable", 0) == served  # not an engine fault

    report = guard.sync(engine)  # fleetd ends the drain
    assert report["draining"] is False
    assert loopback.get(f"{guard.url}/health").status_code == 200
    assert _chat(guard).status_code == 200


def test_a_stream_begun_before_the_drain_runs_to_its_end(guard: GuardProc, engine: str) -> None:
    body = {
        "model": SERVED_NAME,
        "stream": True,
        "max_tokens": 40,
        "ignore_eos": True,
        "messages": [{"role": "user", "content": "Go on."}],
    }
    lines: list[str] = []
    status: list[int] = []
    began = threading.Event()

    def stream() -> None:
        with (
            httpx.Client(timeout=60, trust_env=False) as client,
            client.stream("POST", f"{guard.url}/v1/chat/completions", json=body) as reply,
        ):
            status.append(reply.status_code)
            for line in reply.iter_lines():
                began.set()
                if line.startswith("data: "):
                    lines.append(line)

    reader = threading.Thread(target=stream)
    reader.start()
    try:
        assert began.wait(30), "the stream never began"
        report = guard.sync(engine, draining=WHY)
        assert report["draining"] is True
        assert report["in_flight"] == 1, report  # the stream, past the door before the drain
        assert _chat(guard).status_code == 503  # a new one is refused meanwhile
    finally:
        reader.join(60)
    assert status == [200]
    assert lines[-1] == "data: [DONE]", lines[-3:]
    assert not any('"error"' in line for line in lines)
    wait_until(lambda: guard.sync(engine, draining=WHY)["in_flight"] == 0, 10, "the guard quiet")
