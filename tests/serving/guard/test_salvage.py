"""Salvage's rules, its streaming hold, the byte pre-scan and the fair queue's order."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from serving.guard.control import EngineHint
from serving.guard.repair.hygiene import clean_history
from serving.guard.repair.prescan import plain_content
from serving.guard.repair.queue import FairQueue, KeyLimit, QueueTimeout, max_num_seqs_of
from serving.guard.repair.salvage import salvage
from serving.guard.repair.stream import StreamSalvage
from serving.sim.leaks import MARKUP_MODES, markup

TOOLS: dict[str, dict[str, Any]] = {
    "read_file": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
    "bash": {
        "type": "object",
        "properties": {"command": {"type": "string"}, "timeout_s": {"type": "integer"}},
        "required": ["command"],
    },
}
ARGS = {"read_file": {"path": "src/a.py"}, "bash": {"command": "ls -l"}}

prose = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="`"), max_size=80
)
words = st.text(alphabet="abcdefghij .,:;!?()-", min_size=1, max_size=40).filter(
    lambda text: text.strip() != ""
)
blocks = st.builds(
    lambda mode, tool: markup(mode, tool, ARGS[tool]),
    st.sampled_from(MARKUP_MODES),
    st.sampled_from(sorted(TOOLS)),
)


def quoted(prefix: str, block: str, after: str, how: str) -> str:
    """Prose that quotes ``block``: in inline code, in a fence, or with more prose after."""
    if how == "inline":
        return f"{prefix} `{block}` {after}"
    if how == "fence":
        return f"{prefix}\n```\n{block}\n```\n{after}"
    return f"{prefix}\n{block}\n{after}"


def _stream(text: str, cuts: list[int]) -> tuple[str, Any]:
    """``text`` through the streaming hold, in pieces cut at ``cuts``."""
    hold = StreamSalvage(TOOLS, 100_000)
    sent = []
    edges = sorted({0, len(text), *(cut % (len(text) + 1) for cut in cuts)})
    for start, end in itertools.pairwise(edges):
        sent.append(hold.take(text[start:end]))
    outcome, rest = hold.settle()
    return "".join(sent) + rest, outcome


@settings(max_examples=300, deadline=None)
@given(
    prose,
    blocks,
    words,
    st.sampled_from(["inline", "fence", "followed"]),
    st.lists(st.integers(0, 400), max_size=12),
)
def test_prose_that_quotes_the_markup_never_becomes_a_call(
    prefix: str, block: str, after: str, how: str, cuts: list[int]
) -> None:
    text = quoted(prefix, block, after, how)
    assert salvage(text, TOOLS).calls == ()
    streamed, outcome = _stream(text, cuts)
    assert outcome is None or outcome.calls == ()
    assert streamed == text, "a stream that held the quote gives it back unchanged"


@settings(max_examples=100, deadline=None)
@given(words, blocks, st.lists(st.integers(0, 400), max_size=12))
def test_a_trailing_call_is_recovered_however_the_stream_cuts_it(
    prefix: str, block: str, cuts: list[int]
) -> None:
    text = f"{prefix}\n{block}"
    whole = salvage(text, TOOLS)
    assert len(whole.calls) == 1
    streamed, outcome = _stream(text, cuts)
    assert outcome is not None and len(outcome.calls) == 1
    assert streamed == whole.prefix
    name = whole.calls[0]["function"]["name"]
    assert json.loads(whole.calls[0]["function"]["arguments"]) == ARGS[name]


def test_refusals_name_their_reason() -> None:
    block = markup("orphan", "read_file", {"path": "a"})
    assert salvage(block, {}).reason == "the request declared no tools"
    assert "not declared" in (salvage(markup("orphan", "rm", {"path": "a"}), TOOLS).reason or "")
    assert "not closed" in (salvage(block.rsplit("</", 1)[0], TOOLS).reason or "")
    missing = markup("orphan", "bash", {"timeout_s": "3"})
    assert "required argument 'command'" in (salvage(missing, TOOLS).reason or "")
    # headless with a parameter two tools share: not exactly one fits
    shared = {**TOOLS, "cat": TOOLS["read_file"]}
    assert "fits 2" in (salvage(markup("headless", "x", {"path": "a"}), shared).reason or "")
    bad = markup("orphan", "bash", {"command": "ls", "timeout_s": "soon"})
    assert "schema" in (salvage(bad, TOOLS).reason or "")


def test_the_hold_is_bounded_by_salvage_max_chars() -> None:
    hold = StreamSalvage(TOOLS, 300)
    assert hold.take("before <\uff5cDSML\uff5cinvoke na") == "before "
    assert hold.take('me="read_file">') == "" and hold.holding
    released = hold.take("x" * 400)
    assert released.startswith("<\uff5cDSML\uff5cinvoke") and hold.gave_up is not None
    assert hold.take("more") == "more"


def test_the_pre_scan_takes_only_plain_content_chunks() -> None:
    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return f"data: {json.dumps({'id': 'c', 'choices': [choice]})}\n\n".encode()

    assert plain_content(event({"content": "hello "})) == "hello "
    assert plain_content(event({"content": 'say "hi"\n'})) == 'say "hi"\n'
    compact = b'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n'
    assert plain_content(compact) == "x"
    assert plain_content(event({"content": "a <b"})) is None
    assert plain_content(event({"content": ""}, "stop")) is None
    assert plain_content(event({"reasoning": "hm"})) is None
    assert plain_content(event({"tool_calls": []})) is None


def test_the_queue_serves_priority_first_then_arrival_and_times_out() -> None:
    async def scenario() -> tuple[list[str], bool]:
        limits = {"a": KeyLimit(None, 5), "b": KeyLimit(None, 0), "c": KeyLimit(1, 0)}
        queue = FairQueue(limits, 0.5, lambda: 1)
        order: list[str] = []
        await queue.acquire("b")  # the one slot

        async def wait(name: str, key: str) -> None:
            await queue.acquire(key)
            order.append(name)
            await asyncio.sleep(0)
            queue.release(key)

        tasks = [
            asyncio.create_task(wait(n, k)) for n, k in (("b1", "b"), ("b2", "b"), ("a1", "a"))
        ]
        while queue.figures.depth < 3:
            await asyncio.sleep(0.001)
        queue.release("b")
        await asyncio.gather(*tasks)
        await queue.acquire("c")
        timed_out = False
        try:
            await queue.acquire("c")  # over c's own limit: waits, then gives up
        except QueueTimeout:
            timed_out = True
        return order, timed_out

    order, timed_out = asyncio.run(scenario())
    assert order == ["a1", "b1", "b2"]
    assert timed_out


@pytest.mark.parametrize("mode", MARKUP_MODES)
def test_each_leak_mode_is_the_variant_it_names(mode: str) -> None:
    outcome = salvage(markup(mode, "read_file", {"path": "a.py"}), TOOLS)
    assert len(outcome.calls) == 1
    expected = {"wrapper": "wrapper", "underscore": "wrapper _tool_calls"}.get(mode, mode)
    if mode in ("calls", "_calls"):
        expected = f"wrapper {mode}"
    assert outcome.variant == expected


def test_the_engine_slots_come_from_its_command_line() -> None:
    assert max_num_seqs_of(["vllm", "serve", "m", "--max-num-seqs", "8"]) == 8
    assert max_num_seqs_of(["vllm", "serve", "m", "--max-num-seqs=16"]) == 16
    assert max_num_seqs_of(["vllm", "serve", "m", "--max-num-seqs", "x"]) is None
    assert max_num_seqs_of(["vllm", "serve", "m"]) is None


def test_hygiene_cleans_assistant_text_parts_and_leaves_the_rest() -> None:
    request: dict[str, Any] = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "<think>mine</think>"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "<think>why</think>Done."},
                    {"type": "image_url", "image_url": {"url": "data:,"}},
                ],
            },
        ]
    }
    assert clean_history(request) == 1
    user, assistant = request["messages"]
    assert user["content"][0]["text"] == "<think>mine</think>"
    assert assistant["content"][0]["text"] == "Done."
    assert assistant["content"][1]["type"] == "image_url"


def test_fleetd_names_the_build_and_the_engine_slots_each_sync() -> None:
    hint = EngineHint()
    hint.update({"engine_url": "http://127.0.0.1:9", "build": "abc123", "max_num_seqs": 8})
    assert (hint.build, hint.max_num_seqs) == ("abc123", 8)
    hint.update({"engine_url": "http://127.0.0.1:9", "max_num_seqs": "eight"})
    assert (hint.build, hint.max_num_seqs) == (None, None)
