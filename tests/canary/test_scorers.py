"""The canaries' pure parts: prompt builders and scorers, table-driven, no engine."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from serving.canary import copy, reasoning, throughput, toolcall
from serving.canary.model import CanaryResult, Outcome, Verdict, worst_exit_code
from serving.canary.throughput import StreamTiming
from serving.sim.replies import code_identifiers

DSML = "\uff5cDSML\uff5c"


def test_identifiers_are_distinct_and_of_the_three_kinds_that_break() -> None:
    idents = copy.make_identifiers(random.Random(3), 40)
    assert len(set(idents)) == 40
    assert sum(1 for i in idents if i.startswith("/") and "_" in i) >= 13  # image paths
    assert sum(1 for i in idents if "_" in i and not i.startswith("/")) >= 13  # snake_case_042
    hexes = [i for i in idents if all(c in "0123456789abcdef" for c in i)]
    assert len(hexes) >= 13 and all(any(c.isdigit() for c in h) for h in hexes)


def test_the_copy_prompt_holds_no_code_like_word_but_the_identifiers() -> None:
    """An echoing engine must find exactly the list: the instructions and filler are prose."""
    idents = copy.make_identifiers(random.Random(5), 12)
    assert code_identifiers(copy.copy_prompt(idents, filler_words=300)) == idents


@pytest.mark.parametrize(
    ("reply", "exact", "result"),
    [
        pytest.param(
            "\n".join(["a_b_001", "/w/img_0042.png", "9f3ac2e1"]), 3, Outcome.PASS, id="all"
        ),
        pytest.param(
            "- a_b_001\n  `/w/img_0042.png`\n* 9f3ac2e1\n", 3, Outcome.PASS, id="bullets-ok"
        ),
        pytest.param("a_b_001\n/w/img_042.png\n9f3ac2e1", 2, Outcome.FAIL, id="one-of-three"),
        pytest.param("ab_001\n/w/img_0042.png\n9f3ac2e1", 2, Outcome.FAIL, id="dropped-underscore"),
        pytest.param("a_b_001 /w/img_0042.png 9f3ac2e1", 0, Outcome.FAIL, id="merged-line"),
        pytest.param("", 0, Outcome.FAIL, id="empty"),
    ],
)
def test_copy_scores_exact_lines(reply: str, exact: int, result: Outcome) -> None:
    score = copy.score_copy(["a_b_001", "/w/img_0042.png", "9f3ac2e1"], reply)
    assert score.exact == exact
    assert copy.judge_copy(score).result is result


@pytest.mark.parametrize(
    ("misses", "result"),
    [(0, Outcome.PASS), (1, Outcome.WARN), (4, Outcome.WARN), (5, Outcome.FAIL), (8, Outcome.FAIL)],
)
def test_any_miss_warns_and_under_90_percent_fails(misses: int, result: Outcome) -> None:
    idents = copy.make_identifiers(random.Random(1), 40)
    reply = "\n".join(i + "x" if n < misses else i for n, i in enumerate(idents))
    verdict = copy.judge_copy(copy.score_copy(idents, reply))
    assert verdict.result is result
    assert verdict.figure == pytest.approx((40 - misses) / 40)
    if result is Outcome.FAIL:
        assert "token corruption" in verdict.advice
        assert "NaN-logit" in verdict.advice and "Engram" in verdict.advice


def test_the_long_context_repeat_reports_the_worse_of_the_two() -> None:
    good = Verdict(Outcome.PASS, 1.0, "short")
    bad = Verdict(Outcome.FAIL, 0.5, "long")
    assert copy.worse(good, bad) is bad
    assert copy.worse(bad, good) is bad


def _call(
    name: str = toolcall.TOOL_NAME, arguments: str = '{"path": "/w/notes.txt"}'
) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize(
    ("message", "result"),
    [
        pytest.param({"content": None, "tool_calls": [_call()]}, Outcome.PASS, id="parsed"),
        pytest.param(
            {"content": f'<{DSML}tool_calls>\n<{DSML}invoke name="read_file">', "tool_calls": []},
            Outcome.FAIL,
            id="dsml-leak",
        ),
        pytest.param(
            {"content": f'<{DSML}invoke name="read_file">', "tool_calls": [_call()]},
            Outcome.FAIL,
            id="orphan-invoke-beside-a-call",
        ),
        pytest.param({"content": '<invoke name="read_file">'}, Outcome.FAIL, id="xml-invoke"),
        pytest.param({"content": "<tool_calls>[]</tool_calls>"}, Outcome.FAIL, id="xml-wrapper"),
        pytest.param({"content": "I will read it."}, Outcome.FAIL, id="no-call"),
        pytest.param({"tool_calls": [_call(arguments="{path: x")]}, Outcome.FAIL, id="bad-json"),
        pytest.param({"tool_calls": [_call(arguments="[]")]}, Outcome.FAIL, id="not-an-object"),
        pytest.param({"tool_calls": [_call(name="bash")]}, Outcome.FAIL, id="wrong-tool"),
    ],
)
def test_tool_call_judgement(message: dict[str, Any], result: Outcome) -> None:
    verdict = toolcall.judge_tool_calls(message)
    assert verdict.result is result
    if result is Outcome.FAIL:
        assert "--enable-auto-tool-choice" in verdict.advice
        assert "--tool-call-parser" in verdict.advice


def test_the_tool_request_declares_one_tool_with_a_required_argument() -> None:
    request = toolcall.tool_request()
    (tool,) = request["tools"]
    assert tool["function"]["name"] == toolcall.TOOL_NAME
    assert tool["function"]["parameters"]["required"] == ["path"]
    json.dumps(request)


@pytest.mark.parametrize(
    ("message", "result"),
    [
        pytest.param({"content": "yes", "reasoning_content": "17 is prime"}, Outcome.PASS, id="rc"),
        pytest.param(
            {"content": "yes", "reasoning_content": "17 is prime", "reasoning": "17 is prime"},
            Outcome.PASS,
            id="both",
        ),
        pytest.param(
            {"content": "yes", "reasoning": "17 is prime"}, Outcome.WARN, id="reasoning-only"
        ),
        pytest.param({"content": "17 is prime</think>yes"}, Outcome.FAIL, id="think-tag"),
        pytest.param(
            {"content": "17 is prime. yes", "reasoning_content": "17 is prime"},
            Outcome.FAIL,
            id="repeated-in-content",
        ),
        pytest.param({"content": "yes"}, Outcome.FAIL, id="none"),
    ],
)
def test_reasoning_field_judgement(message: dict[str, Any], result: Outcome) -> None:
    assert reasoning.judge_reasoning(message).result is result


@pytest.mark.parametrize(
    ("message", "result"),
    [
        pytest.param({"content": "yes", "reasoning": "17 is prime"}, Outcome.PASS, id="reasoning"),
        pytest.param(
            {"content": "yes", "reasoning": "17 is prime", "reasoning_content": "17 is prime"},
            Outcome.PASS,
            id="both",
        ),
        pytest.param(
            {"content": "yes", "reasoning_content": "17 is prime"}, Outcome.WARN, id="rc-only"
        ),
        pytest.param({"content": "17 is prime</think>yes"}, Outcome.FAIL, id="think-tag"),
        pytest.param({"content": "yes"}, Outcome.FAIL, id="none"),
    ],
)
def test_a_build_expected_to_answer_in_reasoning_is_judged_on_it(
    message: dict[str, Any], result: Outcome
) -> None:
    """The DeepSeek presets' build returns ``reasoning`` (seeds): that passes there."""
    verdict = reasoning.judge_reasoning(message, "reasoning")
    assert verdict.result is result
    if result is Outcome.WARN:
        assert "expected_reasoning_field" in (verdict.advice or "")


def test_the_reasoning_request_turns_thinking_on_with_an_explicit_effort() -> None:
    kwargs = reasoning.reasoning_request()["chat_template_kwargs"]
    assert kwargs["thinking"] is True
    assert kwargs["reasoning_effort"]


@pytest.mark.parametrize(
    ("decode", "prefill", "brake", "result", "advice_word"),
    [
        pytest.param(98.1, 5300.0, False, Outcome.PASS, "", id="on-baseline"),
        pytest.param(40.0, 5300.0, False, Outcome.PASS, "", id="at-40-percent"),
        pytest.param(24.5, 5300.0, True, Outcome.WARN, "power_brake", id="quarter-with-brake"),
        pytest.param(24.5, 5300.0, False, Outcome.WARN, "thermal", id="quarter-no-brake"),
        pytest.param(98.1, 1000.0, False, Outcome.WARN, "PCIe", id="slow-prefill"),
    ],
)
def test_throughput_against_the_recipe_baseline(
    decode: float, prefill: float, brake: bool, result: Outcome, advice_word: str
) -> None:
    # 129 tokens, the first at prompt/prefill seconds, then 128 more at decode tok/s.
    timing = StreamTiming(1024, 129, 1024 / prefill, 128 / decode)
    verdict = throughput.judge_throughput(timing, 98.1, 5300.0, brake)
    assert verdict.result is result
    assert verdict.figure == pytest.approx(decode, rel=1e-3)
    assert advice_word in verdict.advice
    if brake and result is Outcome.WARN:
        assert verdict.advice.startswith("the power_brake check is active")


def test_throughput_without_a_baseline_passes_and_says_how_to_add_one() -> None:
    verdict = throughput.judge_throughput(StreamTiming(100, 33, 0.1, 1.0), None, None, True)
    assert verdict.result is Outcome.PASS
    assert "expected_decode_tok_s" in verdict.advice


def test_exit_codes_are_the_worst_result() -> None:
    def result(outcome: Outcome) -> CanaryResult:
        return CanaryResult.of("x", "", Verdict(outcome, None, ""), 0.0)

    assert worst_exit_code([result(Outcome.PASS)] * 4) == 0
    assert worst_exit_code([result(Outcome.PASS), result(Outcome.WARN)]) == 1
    assert worst_exit_code([result(Outcome.SKIPPED)]) == 1
    assert worst_exit_code([result(Outcome.WARN), result(Outcome.FAIL)]) == 2
