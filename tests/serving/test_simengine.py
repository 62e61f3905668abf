"""The simulated engine, run as a real child process and spoken to over loopback HTTP."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from serving.sim.options import parse_options
from serving.sim.replies import code_identifiers, compose_reply, mangle
from tests.support.engine_helpers import SERVED_NAME, free_port, is_running, kill_group, sim_argv
from tests.support.waiting import wait_until


@dataclass
class Engine:
    """A running simulated engine and everything it printed so far."""

    process: subprocess.Popen[str]
    port: int
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def saw(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))


def launch(*flags: str, ready_after_s: float = 0.0) -> Engine:
    port = free_port()
    process = subprocess.Popen(
        sim_argv(port, *flags, ready_after_s=ready_after_s),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    engine = Engine(process, port)

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            engine.lines.append(line.rstrip("\n"))

    engine.reader = threading.Thread(target=read, daemon=True)
    engine.reader.start()
    return engine


@pytest.fixture
def engines() -> Iterator[list[Engine]]:
    started: list[Engine] = []
    yield started
    for engine in started:
        kill_group(engine.process.pid)
        engine.process.wait(timeout=5)
        if engine.process.stdout is not None:
            engine.process.stdout.close()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(trust_env=False, timeout=10) as c:
        yield c


def status_of(client: httpx.Client, url: str) -> int | None:
    try:
        return client.get(url, timeout=1).status_code
    except httpx.HTTPError:
        return None


def ready_engine(engines: list[Engine], client: httpx.Client, *flags: str) -> Engine:
    engine = launch(*flags)
    engines.append(engine)
    wait_until(lambda: status_of(client, f"{engine.url}/health") == 200, 10, "ready")
    return engine


def chat(content: str, **extra: object) -> dict[str, object]:
    return {"model": SERVED_NAME, "messages": [{"role": "user", "content": content}], **extra}


def test_loading_answers_503_then_ready_with_the_served_name(
    engines: list[Engine], client: httpx.Client
) -> None:
    engine = launch(ready_after_s=1.0)
    engines.append(engine)
    wait_until(lambda: status_of(client, f"{engine.url}/health") == 503, 10, "503 while loading")
    assert status_of(client, f"{engine.url}/v1/models") == 503
    wait_until(lambda: engine.saw("Loading safetensors checkpoint shards"), 5, "progress line")
    wait_until(lambda: status_of(client, f"{engine.url}/health") == 200, 10, "ready")
    models = client.get(f"{engine.url}/v1/models").json()
    assert [m["id"] for m in models["data"]] == [SERVED_NAME]
    wait_until(lambda: engine.saw("Application startup complete."), 5, "startup line")
    assert engine.saw("Starting vLLM API server")
    # The preset's real vLLM flags were accepted and ignored.
    assert engine.saw("--pipeline-parallel-size 4")


def test_chat_completion_has_the_openai_shape(engines: list[Engine], client: httpx.Client) -> None:
    engine = ready_engine(engines, client)
    body = client.post(
        f"{engine.url}/v1/chat/completions", json=chat("copy my_value and otherName2")
    ).json()
    assert body["object"] == "chat.completion"
    assert body["model"] == SERVED_NAME
    message = body["choices"][0]["message"]
    assert message["role"] == "assistant"
    assert "my_value" in message["content"]
    assert "otherName2" in message["content"]
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] == len(message["content"].split())


def test_streaming_sends_sse_chunks_at_the_set_pace_and_done(
    engines: list[Engine], client: httpx.Client
) -> None:
    engine = ready_engine(engines, client, "--sim-tokens-per-s", "40")
    started = time.monotonic()
    chunks: list[dict[str, Any]] = []
    done = False
    with client.stream(
        "POST", f"{engine.url}/v1/chat/completions", json=chat("hi", stream=True, max_tokens=8)
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if not line:
                continue
            assert line.startswith("data: ")
            if line == "data: [DONE]":
                done = True
                break
            chunks.append(json.loads(line.removeprefix("data: ")))
    elapsed = time.monotonic() - started
    assert done
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0] == {"role": "assistant", "content": ""}
    text = [d["content"] for d in deltas[1:] if "content" in d]
    assert len(text) == 8
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert elapsed >= 8 / 40 * 0.9


def test_metrics_use_vllm_names_with_model_name_labels(
    engines: list[Engine], client: httpx.Client
) -> None:
    engine = ready_engine(engines, client, "--sim-tokens-per-s", "500")
    client.post(f"{engine.url}/v1/chat/completions", json=chat("hello", max_tokens=5))
    text = client.get(f"{engine.url}/metrics").text
    assert f'vllm:generation_tokens_total{{model_name="{SERVED_NAME}"}} 5.0' in text
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:time_to_first_token_seconds_bucket",
    ):
        assert f"{name}{{" in text


def test_tool_call_is_parsed_or_leaked_as_dsml(engines: list[Engine], client: httpx.Client) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "parameters": {
                    "type": "object",
                    "properties": {"command": {"type": "string"}},
                    "required": ["command"],
                },
            },
        }
    ]
    good = ready_engine(engines, client)
    leaky = ready_engine(engines, client, "--sim-leak-dsml")
    parsed = client.post(f"{good.url}/v1/chat/completions", json=chat("run ls", tools=tools))
    message = parsed.json()["choices"][0]["message"]
    assert message["content"] is None
    assert message["tool_calls"][0]["function"]["name"] == "bash"
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"command": "ls"}
    leaked = client.post(f"{leaky.url}/v1/chat/completions", json=chat("run ls", tools=tools))
    message = leaked.json()["choices"][0]["message"]
    assert "tool_calls" not in message
    assert "<\uff5cDSML\uff5ctool_calls>" in message["content"]
    assert '<\uff5cDSML\uff5cinvoke name="bash">' in message["content"]


def test_corrupting_engine_mangles_copied_identifiers(
    engines: list[Engine], client: httpx.Client
) -> None:
    engine = ready_engine(engines, client, "--sim-corrupt-identifiers-pct", "100")
    body = client.post(
        f"{engine.url}/v1/chat/completions", json=chat("copy alpha_beta and gammaDelta9")
    ).json()
    content = body["choices"][0]["message"]["content"]
    assert "alpha_beta" not in content
    assert "gammaDelta9" not in content
    assert mangle("alpha_beta") in content


def test_bad_requests_get_clear_errors(engines: list[Engine], client: httpx.Client) -> None:
    engine = ready_engine(engines, client)
    url = f"{engine.url}/v1/chat/completions"
    bad_json = client.post(url, content=b"{nope", headers={"Content-Type": "application/json"})
    assert bad_json.status_code == 400
    assert "not JSON" in bad_json.json()["error"]["message"]
    assert client.post(url, json={"model": SERVED_NAME}).status_code == 400
    wrong = client.post(url, json={**chat("x"), "model": "other"})
    assert wrong.status_code == 404
    assert "does not exist" in wrong.json()["error"]["message"]
    assert client.get(f"{engine.url}/nowhere").status_code == 404


def test_sigint_shuts_down_with_exit_0_within_a_second(
    engines: list[Engine], client: httpx.Client
) -> None:
    engine = ready_engine(engines, client)
    engine.process.send_signal(signal.SIGINT)
    assert engine.process.wait(timeout=1.5) == 0
    assert engine.reader is not None
    engine.reader.join(timeout=2)
    assert engine.saw("Shutting down")


def test_sigint_during_loading_also_exits_0(engines: list[Engine]) -> None:
    engine = launch(ready_after_s=30)
    engines.append(engine)
    wait_until(lambda: engine.saw("Loading safetensors"), 10, "loading")
    engine.process.send_signal(signal.SIGINT)
    assert engine.process.wait(timeout=1.5) == 0


def test_crash_prints_the_cuda_trace_and_exits_non_zero(engines: list[Engine]) -> None:
    # Ready for 0.1 s only: its own log line says it was ready, not a look at /health that a
    # loaded machine makes too late (a CI run missed that window).
    engine = launch("--sim-crash-after-s", "0.1")
    engines.append(engine)
    assert engine.process.wait(timeout=30) != 0
    assert engine.reader is not None
    engine.reader.join(timeout=2)
    assert engine.saw("Application startup complete.")
    assert engine.lines[-1] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert engine.saw("torch.AcceleratorError")
    assert engine.saw("cudaErrorIllegalAddress")


def test_fail_while_loading_prints_the_chosen_kind(engines: list[Engine]) -> None:
    engine = launch(
        "--sim-fail-start-after-s", "0.1", "--sim-crash-kind", "kv_oom", ready_after_s=5
    )
    engines.append(engine)
    assert engine.process.wait(timeout=5) == 1
    assert engine.reader is not None
    engine.reader.join(timeout=2)
    assert engine.saw("KV cache is needed, which is larger than the available KV cache memory")
    assert not engine.saw("Application startup complete.")


def test_hang_accepts_connections_but_never_answers(
    engines: list[Engine], client: httpx.Client
) -> None:
    engine = ready_engine(engines, client, "--sim-hang-after-s", "0.1")
    wait_until(lambda: engine.saw("No available shared memory broadcast block"), 5, "hang")
    with pytest.raises(httpx.ReadTimeout):
        client.get(f"{engine.url}/health", timeout=0.5)
    assert is_running(engine.process.pid)
    # Still stoppable the vLLM way.
    engine.process.send_signal(signal.SIGINT)
    assert engine.process.wait(timeout=2) == 0


def test_ignore_signals_survives_sigint_and_sigterm(
    engines: list[Engine], client: httpx.Client
) -> None:
    engine = ready_engine(engines, client, "--sim-ignore-signals")
    engine.process.send_signal(signal.SIGINT)
    engine.process.send_signal(signal.SIGTERM)
    with pytest.raises(subprocess.TimeoutExpired):
        engine.process.wait(timeout=0.5)
    assert status_of(client, f"{engine.url}/health") == 200


def test_ignore_sigint_still_stops_on_sigterm(engines: list[Engine], client: httpx.Client) -> None:
    engine = ready_engine(engines, client, "--sim-ignore-sigint")
    engine.process.send_signal(signal.SIGINT)
    with pytest.raises(subprocess.TimeoutExpired):
        engine.process.wait(timeout=0.5)
    engine.process.send_signal(signal.SIGTERM)
    assert engine.process.wait(timeout=2) == 0


def test_port_in_use_exits_1_with_a_clear_line(engines: list[Engine], client: httpx.Client) -> None:
    first = ready_engine(engines, client)
    second = subprocess.run(
        sim_argv(first.port, ready_after_s=0),
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    assert second.returncode == 1
    assert "cannot bind" in second.stdout


def test_bad_flags_name_the_flag() -> None:
    result = subprocess.run(
        sim_argv(8000, "--sim-corrupt-identifiers-pct", "150"),
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    assert result.returncode == 2
    assert "--sim-corrupt-identifiers-pct" in result.stderr
    assert "between 0 and 100" in result.stderr


def test_options_ignore_unknown_vllm_flags() -> None:
    options = parse_options(
        [
            "serve",
            "/models/dsv4",
            "--speculative-config",
            '{"method":"dspark","num_speculative_tokens":5}',
            "--tokenizer-mode",
            "deepseek_v4",
            "--served-model-name",
            "dsv4s",
            "--port",
            "8098",
        ]
    )
    assert options.served_model_name == "dsv4s"
    assert options.port == 8098
    assert "--tokenizer-mode" in options.ignored
    # The speculative config is read: it turns the spec-decode metrics on.
    assert options.spec.num_speculative_tokens == 5


def test_identifiers_are_code_like_words_in_order() -> None:
    assert code_identifiers("copy foo_bar, BazQux and x1y, then the plain word, foo_bar") == [
        "foo_bar",
        "BazQux",
        "x1y",
    ]


def test_corruption_rate_is_roughly_the_requested_percentage() -> None:
    options = parse_options(["serve", "m", "--sim-corrupt-identifiers-pct", "20"])
    words = [f"name_{i}_value" for i in range(200)]
    reply = compose_reply(
        {"messages": [{"role": "user", "content": " ".join(words)}]}, options, random.Random(7)
    )
    assert reply.content is not None
    kept = sum(1 for word in words if f" {word}," in reply.content or f" {word}." in reply.content)
    assert 120 <= kept <= 190
