"""The guard in front of two engines routes each request by its ``model`` (issue 42 point 4).

A real guard process and two simulated engines (real processes) serving different names,
named to the guard as fleetd names them (``engines`` in the sync). A chat reaches the
engine that serves its model (each engine's last request shows it), ``/v1/models`` lists
both, an unknown model gets a 404 ``model_not_found`` in OpenAI's shape naming those
served (the engines never see it), and with one engine named the guard passes everything through as before (the engine judges the model).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support import loopback
from tests.support.engine_helpers import free_port, kill_group, sim_argv
from tests.support.guardproc import CONTROL_TOKEN, GuardProc, openai_error, running_guard
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow(seconds=5)

MODELS = ("dsv4", "qwen")


@pytest.fixture(scope="module")
def engines() -> Iterator[dict[str, str]]:
    """Two simulated engines: served name -> URL."""
    procs: list[subprocess.Popen[bytes]] = []
    urls: dict[str, str] = {}
    try:
        for name in MODELS:
            port = free_port()
            argv = sim_argv(port, "--served-model-name", name, ready_after_s=0)
            procs.append(
                subprocess.Popen(
                    argv,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
            urls[name] = f"http://127.0.0.1:{port}"
        for url in urls.values():
            wait_until(lambda url=url: _ready(url), 30, "a simulated engine ready")
        yield urls
    finally:
        for proc in procs:
            kill_group(proc.pid)
            proc.wait()


def _ready(url: str) -> bool:
    try:
        return loopback.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _sync(guard: GuardProc, engines: list[dict[str, Any]]) -> None:
    document = {
        "engine_url": engines[0]["url"],
        "serving_state": "ready",
        "profile": engines[0].get("profile"),
        "since_seq": 0,
        "engines": engines,
    }
    answer = loopback.post(
        f"http://127.0.0.1:{guard.control_port}/guard/sync",
        json=document,
        headers={"Authorization": f"Bearer {CONTROL_TOKEN}"},
    )
    assert answer.status_code == 200, answer.text


@pytest.fixture
def guard(engines: dict[str, str]) -> Iterator[GuardProc]:
    with running_guard({"listen": "127.0.0.1:0"}, engines["dsv4"]) as running:
        _sync(
            running,
            [
                {"model": "dsv4", "url": engines["dsv4"], "state": "ready", "profile": "big"},
                {"model": "qwen", "url": engines["qwen"], "state": "ready", "profile": "small"},
            ],
        )
        yield running


def _chat(guard: GuardProc, model: str) -> httpx.Response:
    body = {"model": model, "max_tokens": 2, "messages": [{"role": "user", "content": model}]}
    return loopback.post(f"{guard.url}/v1/chat/completions", json=body, timeout=30)


def _last_model(engine_url: str) -> Any:
    last = loopback.get(f"{engine_url}/sim/last-request", timeout=5).json()
    return (last.get("body") or {}).get("model")


def test_each_chat_reaches_the_engine_serving_its_model(
    guard: GuardProc, engines: dict[str, str]
) -> None:
    for name in MODELS:
        reply = _chat(guard, name)
        assert reply.status_code == 200, reply.text
        assert reply.json()["model"] == name
        assert _last_model(engines[name]) == name


def test_models_lists_every_engine_and_an_unknown_model_is_a_404(
    guard: GuardProc, engines: dict[str, str]
) -> None:
    listed = loopback.get(f"{guard.url}/v1/models").json()
    assert [row["id"] for row in listed["data"]] == list(MODELS)
    reply = _chat(guard, "llama")
    assert reply.status_code == 404
    error = openai_error(reply)
    assert error["code"] == "model_not_found" and error["param"] == "model"
    assert "dsv4, qwen" in error["message"]
    assert "llama" not in (_last_model(engines["dsv4"]), _last_model(engines["qwen"]))


def test_one_engine_named_passes_every_model_through(
    guard: GuardProc, engines: dict[str, str]
) -> None:
    _sync(guard, [{"model": "dsv4", "url": engines["dsv4"], "state": "ready"}])
    reply = _chat(guard, "llama")
    assert reply.status_code == 404
    assert "on this rig" not in reply.text  # the engine's own answer, as before
    assert "unknown_model" not in guard.sync(engines["dsv4"])["counters"]
    assert _chat(guard, "dsv4").status_code == 200
