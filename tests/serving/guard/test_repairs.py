"""The guard's repairs end to end: a real guard before the real simulated engine, in process.

Each markup variant the seeds report is leaked by the engine (``--sim-leak-mode``) and
walked through the streaming and the non-streaming path; history hygiene is proven by what
the engine received (``/sim/last-request``); loops are cut, sessions marked stale, keys
queued by priority.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

from hwcheck.sim.scenario import load_scenario
from serving.guard.keys import hash_key, new_key
from serving.sim.leaks import MARKUP_MODES
from serving.sim.scenario import parse_engine_scenario, simulated_engine_args
from tests.support.guardrig import MODEL, GuardRig, guard_rig
from tests.support.waiting import wait_until

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=25)

TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "minLength": 3}},
            "required": ["path"],
        },
    },
}
# The same name, but an integer argument the markup carries as text: salvage must refuse.
WRONG_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "line": {"type": "integer"}},
            "required": ["path", "line"],
        },
    },
}
ASK = [{"role": "user", "content": "show me src/app_main.py"}]


def _events(text: str) -> list[dict[str, Any]]:
    chunks = []
    for line in text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            chunks.append(json.loads(line[6:]))
    return chunks


def _streamed(text: str) -> tuple[str, list[dict[str, Any]], str | None]:
    """Content, tool calls and the finish reason of a streamed reply."""
    content, calls, finish = "", [], None
    for chunk in _events(text):
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            content += delta.get("content") or ""
            calls.extend(delta.get("tool_calls") or [])
            finish = choice.get("finish_reason") or finish
    return content, calls, finish


def _chat(rig: GuardRig, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(
        f"{rig.guard_url}/v1/chat/completions",
        json={"model": MODEL, **body},
        headers=headers,
        timeout=60,
    )


@pytest.mark.parametrize("mode", MARKUP_MODES)
def test_every_markup_variant_is_recovered_streamed_and_whole(mode: str) -> None:
    repair = {"salvage_tool_calls": True}
    with guard_rig({"repair": repair}, "--sim-leak-mode", mode) as rig:
        whole = _chat(rig, {"messages": ASK, "tools": [TOOL]})
        assert whole.status_code == 200
        choice = whole.json()["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        call = choice["message"]["tool_calls"][0]["function"]
        assert call["name"] == "read_file"
        assert json.loads(call["arguments"]) == {"path": "src/app_main.py"}
        assert "DSML" not in (choice["message"]["content"] or "")
        assert "salvaged" in whole.headers["x-cmpfleet-repaired"]
        assert float(whole.headers["x-cmpfleet-overhead-ms"]) >= 0

        streamed = _chat(rig, {"messages": ASK, "tools": [TOOL], "stream": True})
        content, calls, finish = _streamed(streamed.text)
        assert finish == "tool_calls"
        assert [c["function"]["name"] for c in calls] == ["read_file"]
        assert json.loads(calls[0]["function"]["arguments"]) == {"path": "src/app_main.py"}
        assert "DSML" not in content and "<" not in content
        assert ": x-cmpfleet-repaired salvaged\n\ndata: [DONE]" in streamed.text
        totals = rig.app.stats.repairs.totals
        assert totals["salvaged"] == 2


@pytest.mark.parametrize("mode", MARKUP_MODES)
def test_a_variant_that_does_not_fit_the_schema_stays_text_with_a_reason(mode: str) -> None:
    with guard_rig({"repair": {"salvage_tool_calls": True}}, "--sim-leak-mode", mode) as rig:
        whole = _chat(rig, {"messages": ASK, "tools": [WRONG_TOOL]})
        message = whole.json()["choices"][0]["message"]
        assert not message.get("tool_calls")
        assert "DSML" in message["content"]
        streamed = _chat(rig, {"messages": ASK, "tools": [WRONG_TOOL], "stream": True})
        content, calls, finish = _streamed(streamed.text)
        assert not calls and finish != "tool_calls"
        assert content == message["content"], "left exactly as it was"
        refused = rig.app.stats.repairs.refused
        assert sum(refused.values()) == 2
        assert any("schema" in reason for reason in refused)


def test_salvage_is_off_unless_asked() -> None:
    with guard_rig({}, "--sim-leak-mode", "orphan") as rig:
        message = _chat(rig, {"messages": ASK, "tools": [TOOL]}).json()["choices"][0]["message"]
        assert "DSML" in message["content"] and not message.get("tool_calls")


def test_history_is_cleaned_before_the_engine_sees_it() -> None:
    leaked = (
        "I should read the file first.</think>Reading it. "
        '<\uff5cDSML\uff5cinvoke name="read_file">\n'
        '<\uff5cDSML\uff5cparameter name="path" string="true">src/a.py</\uff5cDSML\uff5cparameter>\n'
        "</\uff5cDSML\uff5cinvoke>"
    )
    user_turn = "quote this back: <think>keep me</think> <\uff5cDSML\uff5cinvoke>"
    messages = [
        {"role": "user", "content": user_turn},
        {"role": "assistant", "content": leaked},
        {"role": "tool", "tool_call_id": "x", "content": "<think>tool output</think>"},
        {"role": "assistant", "content": "<think></think>Fine."},
        {"role": "user", "content": "go on"},
    ]
    with guard_rig({}) as rig:
        answer = _chat(rig, {"messages": messages, "tools": [TOOL]})
        assert answer.status_code == 200
        assert answer.headers["x-cmpfleet-repaired"] == "history"
        seen = httpx.get(f"{rig.engine_url}/sim/last-request", timeout=10).json()
        sent = seen["body"]["messages"]
        assert sent[0]["content"] == user_turn, "user turns are never touched"
        assert sent[2]["content"] == "<think>tool output</think>", "nor tool results"
        assert sent[1]["content"] == "Reading it."
        assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"]) == {"path": "src/a.py"}
        assert sent[3]["content"] == "Fine."
        session = answer.headers["x-cmpfleet-session"]
        record = rig.app.stats.repairs.get(session)
        assert record is not None and record.cleaned_turns == 2
        row = next(r for r in rig.app.stats.document(0)["sessions"] if r["id"] == session)
        assert row["cleaned_turns"] == 2


def test_history_hygiene_can_be_turned_off() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "<think>x</think>hello"},
        {"role": "user", "content": "again"},
    ]
    with guard_rig({"repair": {"history": "off"}}) as rig:
        answer = _chat(rig, {"messages": messages})
        assert "x-cmpfleet-repaired" not in answer.headers
        seen = httpx.get(f"{rig.engine_url}/sim/last-request", timeout=10).json()
        sent = seen["body"]["messages"]
        assert sent[1]["content"] == "<think>x</think>hello"


def _running(rig: GuardRig) -> float:
    value = rig.engine.registry.get_sample_value("vllm:num_requests_running", {"model_name": MODEL})
    return value or 0.0


def test_a_looping_stream_is_cut_and_its_engine_slot_freed() -> None:
    flags = ("--sim-loop-after-tokens", "1", "--sim-tokens-per-s", "50")
    with guard_rig({"repair": {"loops": "cut"}}, *flags) as rig:
        body = {
            "messages": ASK,
            "tools": [TOOL],
            "stream": True,
            "max_tokens": 3000,  # at 50 tok/s a minute of padding: only a cut ends it soon
            "ignore_eos": True,
        }
        started = time.monotonic()
        streamed = _chat(rig, body)
        took_s = time.monotonic() - started
        assert took_s < 20, "the stream ended at the loop, not at max_tokens"
        content, _, finish = _streamed(streamed.text)
        assert finish == "length"
        assert streamed.text.rstrip().endswith(": x-cmpfleet-repaired loop_cut\n\ndata: [DONE]")
        assert content.count("Let me check the run progress.") >= 3
        wait_until(lambda: _running(rig) == 0, 2, "the engine's request cancelled")
        news = rig.app.stats.document(0)["news"]
        cut = [item for item in news if item["kind"] == "loop_cut"]
        assert cut and cut[0]["session"] == streamed.headers["x-cmpfleet-session"]
        assert "tokens deep" in cut[0]["message"]
        assert rig.app.stats.repairs.totals["loop_cut"] == 1


def test_loops_are_only_counted_by_default() -> None:
    flags = ("--sim-loop-after-tokens", "1")
    with guard_rig({}, *flags) as rig:
        streamed = _chat(rig, {"messages": ASK, "tools": [TOOL], "stream": True})
        content, _, finish = _streamed(streamed.text)
        assert content.count("Let me check the run progress.") == 6
        assert finish == "stop"


def test_a_session_under_another_build_is_marked_then_refused() -> None:
    for mode, status in (("mark", 200), ("refuse", 409)):
        with guard_rig({"repair": {"stale": mode}}) as rig:
            headers = {"x-session-id": "agent-1"}
            early = _chat(rig, {"messages": ASK}, **{"x-session-id": "agent-0"})
            rig.app.hint.build = "recipe-a"  # fleetd's first sync names the build
            assert _chat(rig, {"messages": ASK}, **{"x-session-id": "agent-0"}).status_code == 200
            assert "x-cmpfleet-stale" not in early.headers
            first = _chat(rig, {"messages": ASK}, **headers)
            assert first.status_code == 200 and "x-cmpfleet-stale" not in first.headers
            rig.app.hint.build = "recipe-b"  # a new launch
            again = _chat(rig, {"messages": ASK}, **headers)
            assert again.status_code == status
            if status == 409:
                error = again.json()["error"]
                assert error["code"] == "stale_session" and "fresh" in error["message"]
            else:
                assert again.headers["x-cmpfleet-stale"] == "1"
            news = rig.app.stats.document(0)["news"]
            assert [item["kind"] for item in news].count("stale") == 1
            fresh = _chat(rig, {"messages": ASK}, **{"x-session-id": "agent-2"})
            assert fresh.status_code == 200


def test_the_higher_priority_key_is_served_first_and_the_other_gets_429() -> None:
    keys = {name: new_key() for name in ("high", "low", "busy")}
    guard = {
        "queue_timeout_s": 3,
        "retry_after_s": 7,
        "keys": [
            {"name": "high", "sha256": hash_key(keys["high"]), "max_parallel": 1, "priority": 10},
            {"name": "low", "sha256": hash_key(keys["low"]), "max_parallel": 1, "priority": 0},
            {"name": "busy", "sha256": hash_key(keys["busy"])},
        ],
    }
    with guard_rig(guard, "--sim-tokens-per-s", "20") as rig:
        rig.app.hint.max_num_seqs = 1
        answers: dict[str, httpx.Response] = {}
        done_at: dict[str, float] = {}

        def ask(name: str, tokens: int) -> None:
            body = {"messages": ASK, "max_tokens": tokens, "ignore_eos": True}
            answers[name] = _chat(rig, body, Authorization=f"Bearer {keys[name]}")
            done_at[name] = time.monotonic()

        hold = threading.Thread(target=ask, args=("busy", 30))  # 1.5 s on the only slot
        hold.start()
        wait_until(lambda: rig.app.queue.figures.running == 1, 10, "the slot taken")
        low = threading.Thread(target=ask, args=("low", 60))
        low.start()
        wait_until(lambda: rig.app.queue.figures.depth == 1, 10, "low waiting")
        high = threading.Thread(target=ask, args=("high", 60))  # 3 s: low waits past 3 s
        high.start()
        for thread in (hold, low, high):
            thread.join(60)
        assert answers["high"].status_code == 200
        refused = answers["low"]
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "7"
        assert refused.json()["error"]["type"] == "rate_limit_error"
        assert rig.app.queue.figures.timed_out == 1
        document = rig.app.stats.document(0)
        assert document["queue"]["waited"] >= 1


def test_every_response_carries_the_overhead_header() -> None:
    with guard_rig({}) as rig:
        for response in (
            httpx.get(f"{rig.guard_url}/v1/models", timeout=10),
            httpx.get(f"{rig.guard_url}/health", timeout=10),
            _chat(rig, {"messages": ASK}),
            _chat(rig, {"messages": ASK, "stream": True}),
            _chat(rig, {"messages": "not a list"}),
        ):
            assert float(response.headers["x-cmpfleet-overhead-ms"]) < 1000


def test_on_engine_corrupt_the_next_turn_reaches_the_engine_clean() -> None:
    scenario = load_scenario("engine-corrupt")
    flags = simulated_engine_args(parse_engine_scenario(scenario.engine, "engine-corrupt"))
    with guard_rig({}, *flags, "--sim-ready-after-s", "0") as rig:
        first = _chat(rig, {"messages": ASK, "tools": [TOOL]})
        leaked = first.json()["choices"][0]["message"]["content"]
        assert "DSML" in leaked, "engine-corrupt leaks the call as markup"
        session = first.headers["x-cmpfleet-session"]
        before = rig.app.stats.repairs.get(session)
        assert before is None or before.cleaned_turns == 0
        history = [
            *ASK,
            {"role": "assistant", "content": "I will look at it.</think>" + leaked},
            {"role": "user", "content": "and now?"},
        ]
        second = _chat(rig, {"messages": history, "tools": [TOOL]})
        assert second.headers["x-cmpfleet-session"] == session
        seen = httpx.get(f"{rig.engine_url}/sim/last-request", timeout=10).json()
        sent = json.dumps(seen["body"]["messages"], ensure_ascii=False)
        assert "DSML" not in sent and "</think>" not in sent and "I will look" not in sent
        record = rig.app.stats.repairs.get(session)
        assert record is not None and record.cleaned_turns == 1


def test_a_cut_loop_is_nudged_once_within_the_sessions_budget() -> None:
    repair = {"loops": "cut", "loop_nudge": "continue", "nudges_per_hour": 1}
    with guard_rig({"repair": repair}, "--sim-loop-after-tokens", "1") as rig:
        body = {"messages": ASK, "tools": [TOOL], "stream": True}
        headers = {"x-session-id": "looper"}
        nudged = _chat(rig, body, **headers)
        content, _, finish = _streamed(nudged.text)
        assert content.count("Let me check the run progress.") >= 6 + 3
        assert finish == "stop", "the nudged answer streamed on to its own end"
        assert nudged.text.rstrip().endswith("data: [DONE]")
        seen = httpx.get(f"{rig.engine_url}/sim/last-request", timeout=10).json()
        asked = seen["body"]["messages"]
        assert asked[-1] == {"role": "user", "content": "continue"}
        assert asked[-2]["role"] == "assistant" and "Let me check" in asked[-2]["content"]
        totals = rig.app.stats.repairs.totals
        assert totals["loop_cut"] == 1 and totals["nudged"] == 1
        spent = _chat(rig, body, **headers)  # the budget is spent: cut, not nudged
        assert _streamed(spent.text)[2] == "length"
        assert totals["loop_cut"] == 2 and totals["nudged"] == 1


@pytest.mark.parametrize(
    ("mode", "leak"), [("reasoning", "</think>"), ("empty-think", "<think></think>")]
)
def test_leaked_reasoning_and_empty_think_blocks_never_go_back_to_the_engine(
    mode: str, leak: str
) -> None:
    with guard_rig({}, "--sim-leak-mode", mode) as rig:
        ask = {"messages": ASK, "chat_template_kwargs": {"thinking": True}}
        said = _chat(rig, ask).json()["choices"][0]["message"]["content"]
        assert leak in said, f"--sim-leak-mode {mode} leaks into content"
        history = [*ASK, {"role": "assistant", "content": said}, {"role": "user", "content": "ok"}]
        again = _chat(rig, {**ask, "messages": history})
        assert again.headers["x-cmpfleet-repaired"] == "history"
        sent = httpx.get(f"{rig.engine_url}/sim/last-request", timeout=10).json()["body"]
        cleaned = sent["messages"][1]["content"]
        assert "think>" not in cleaned and cleaned, cleaned


def test_a_client_that_hangs_up_while_queued_never_reaches_the_engine() -> None:
    key = new_key()
    guard = {"keys": [{"name": "solo", "sha256": hash_key(key), "max_parallel": 1}]}
    with guard_rig(guard, "--sim-tokens-per-s", "20") as rig:
        auth = {"Authorization": f"Bearer {key}"}
        body = {"model": MODEL, "messages": ASK, "max_tokens": 40, "ignore_eos": True}
        url = f"{rig.guard_url}/v1/chat/completions"
        holder = threading.Thread(
            target=lambda: httpx.post(url, json=body, headers=auth, timeout=60)
        )
        holder.start()  # 2 s on the key's only slot
        wait_until(lambda: rig.app.queue.figures.running == 1, 10, "the slot taken")
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url, json={**body, "max_tokens": 1}, headers=auth, timeout=0.5)
        wait_until(lambda: rig.app.queue.figures.depth == 0, 10, "the waiter gone")
        holder.join(60)
        wait_until(lambda: rig.app.queue.figures.running == 0, 10, "the slot free")
        seen = httpx.get(f"{rig.engine_url}/sim/last-request", timeout=10).json()
        assert seen["body"]["max_tokens"] == 40, "the hung-up request never reached the engine"
        assert rig.app.queue.figures.timed_out == 0
