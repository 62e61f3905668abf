"""The guard in front of several engines (issue 42): fleetd tells the guard every engine
(``[serving] run = ["low", "high"]`` on a simulated 8-card rig, each serving its own
model), so ``/v1/models`` through the guard lists both, a chat reaches each engine by its
``model``, and a model no engine serves gets a 404 in OpenAI's error shape."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from daemon.engine.fleet import side_state_dir
from tests.support import loopback
from tests.support.fleetd import Fleetd, free_port, kill_engine, start_fleetd, stop_all, wait_until

SCENARIOS = Path(__file__).resolve().parents[3] / "hwcheck" / "sim" / "scenarios"
CONFIG = """
[serving]
run = ["low", "high"]

[serving.profiles.low]
preset = "sim-engine"
gpus = "0,1,2,3"
served_model_name = "low-model"

[serving.profiles.high]
preset = "sim-engine"
gpus = "4,5,6,7"
served_model_name = "high-model"

[canary]
enabled = false

[guard]
listen = "127.0.0.1:{guard_port}"
"""


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fleetd, str]]:
    tmp = tmp_path_factory.mktemp("guarded")
    guard_port = free_port()
    config = tmp / "fleet.toml"
    config.write_text(CONFIG.format(guard_port=guard_port))
    state = tmp / "state"
    daemon = start_fleetd(tmp, state, simulate=str(SCENARIOS / "healthy-8.toml"), config=config)
    try:
        yield daemon, f"http://127.0.0.1:{guard_port}"
    finally:
        stop_all([daemon])
        kill_engine(side_state_dir(state, "high"))


def _models(guard: str) -> list[str]:
    try:
        answer = loopback.get(f"{guard}/v1/models", timeout=10)
    except httpx.HTTPError:  # the guard is not listening yet
        return []
    if answer.status_code != 200:
        return []
    return [str(item["id"]) for item in answer.json()["data"]]


def test_the_guard_lists_both_models_and_routes_a_chat_to_each(
    guarded: tuple[Fleetd, str],
) -> None:
    daemon, guard = guarded
    wait_until(
        lambda: all(e["state"] == "ready" for e in daemon.get("/api/v1/status").json()["engines"]),
        60,
        "both engines ready",
    )
    wait_until(lambda: set(_models(guard)) == {"low-model", "high-model"}, 30, "both models")
    for model in ("low-model", "high-model"):
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        answer = loopback.post(f"{guard}/v1/chat/completions", json=body, timeout=30)
        assert answer.status_code == 200, answer.text
        assert answer.json()["model"] == model
    body = {"model": "nosuch", "messages": [{"role": "user", "content": "hi"}]}
    missing = loopback.post(f"{guard}/v1/chat/completions", json=body, timeout=30)
    assert missing.status_code == 404, missing.text
    error = missing.json()["error"]
    assert error["code"] == "model_not_found" and error["type"] == "invalid_request_error"
    assert "low-model" in error["message"] and "high-model" in error["message"]
