"""The deep canaries' pure parts: filler, depths, recall, loops, determinism, regressions."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from serving.canary.depth import (
    DepthResult,
    breaks_at,
    combine,
    depth_label,
    filler,
    filler_words_for,
    plan_depths,
)
from serving.canary.determinism import judge_determinism
from serving.canary.loop import TOOL_NAME, judge_loop, loop_request
from serving.canary.model import Outcome, Verdict
from serving.canary.recall import judge_recall, make_facts, recall_request, score_recall
from serving.canary.regressions import BuildStandings, Standing, regressions


def test_filler_is_plain_prose_of_the_asked_length_and_repeatable() -> None:
    text = filler(filler_words_for(16_000), seed=7)
    assert len(text.split()) == 12_000
    assert text == filler(12_000, seed=7)
    assert text != filler(12_000, seed=8)
    assert not any(ch.isdigit() or ch in "_/" for ch in text)
    assert 3.5 < len(text) / 12_000 * 3 / 4 < 4.5  # about 4 characters a token


def test_depths_that_do_not_fit_the_context_are_skipped_with_why() -> None:
    usable, skipped = plan_depths([128_000, 16_000, 16_000, 64_000], 131_072, 300)
    assert usable == [16_000, 64_000]
    assert skipped[0][0] == 128_000
    assert "max_model_len 131072" in skipped[0][1]
    assert plan_depths([200_000], None, 300) == ([200_000], [])
    assert depth_label(96_000) == "96k"


def _at(depth: int, result: Outcome, figure: float | None, message: str = "m") -> DepthResult:
    return DepthResult(depth, Verdict(result, figure, message, f"advice {depth}"))


def test_combine_reports_the_curve_and_where_it_breaks() -> None:
    results = [
        _at(16_000, Outcome.PASS, 1.0),
        _at(64_000, Outcome.WARN, 0.95, "19/20"),
        _at(96_000, Outcome.FAIL, 0.15, "3/20"),
    ]
    verdict = combine("copy", results, [(128_000, "above max_model_len")])
    assert verdict.result is Outcome.FAIL
    assert verdict.figure == 0.15
    assert verdict.advice == "advice 96000"  # the worst depth's
    assert verdict.message == "copy 100% at 16k, 95% at 64k, 15% at 96k: breaks at 64k (19/20)"
    assert [d["depth"] for d in verdict.details["depths"]] == [16_000, 64_000, 96_000, 128_000]
    assert verdict.details["depths"][-1]["result"] == "skipped"
    assert verdict.details["breaks_at"] == 64_000 == breaks_at(results)


def test_combine_with_nothing_judged_is_skipped() -> None:
    verdict = combine("copy", [_at(16_000, Outcome.SKIPPED, None, "engine busy")])
    assert verdict.result is Outcome.SKIPPED
    assert verdict.message == "engine busy"
    assert combine("copy", [], [(16_000, "too long")]).message == "every depth skipped: too long"


def test_recall_plants_facts_through_the_passage_and_scores_exact_codes() -> None:
    facts = make_facts(random.Random(1), 8)
    assert len({f.label for f in facts}) == 8
    content = recall_request(facts, 16_000, seed=3)["messages"][0]["content"]
    positions = [content.index(f.sentence) for f in facts]
    assert positions == sorted(positions)
    assert positions[0] < len(content) * 0.1 < len(content) * 0.9 < positions[-1]
    assert content.rstrip().endswith(facts[-1].label)
    reply = "\n".join(f"- {f.label}: {f.code}" for f in facts[2:])
    reply += f"\n{facts[0].label}: {facts[0].code[::-1]}"  # a wrong code
    score = score_recall(facts, reply)
    assert (score.found, score.misses) == (6, (facts[0].label, facts[1].label))
    assert judge_recall(score).result is Outcome.WARN
    assert judge_recall(score_recall(facts, "")).result is Outcome.FAIL
    whole = "\n".join(f"{f.label}: {f.code}" for f in facts)
    assert judge_recall(score_recall(facts, whole)).result is Outcome.PASS


def test_the_loop_request_is_an_agent_exchange_with_a_long_tool_result() -> None:
    body = loop_request(20_000, seed=1)
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "user"]
    assert len(body["messages"][3]["content"]) > 60_000
    assert body["tools"][0]["function"]["name"] == TOOL_NAME


def _call(name: str = TOOL_NAME, arguments: str = '{"run_id": "nb-7"}') -> dict[str, object]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize(
    ("message", "result", "words"),
    [
        ({"content": "Let me check.", "tool_calls": [_call()]}, Outcome.PASS, "called"),
        ({"content": "Let me check the run progress.", "tool_calls": None}, Outcome.FAIL,
         "announces a call it never makes"),
        ({"content": "Checking the run.\nChecking the run.\nChecking the run.",
          "tool_calls": [_call()]}, Outcome.FAIL, "repeats 'Checking the run.' 3 times"),
        ({"content": '<\uff5cDSML\uff5cinvoke name="x">', "tool_calls": None}, Outcome.FAIL,
         "raw markup"),
        ({"content": "The run is still going.", "tool_calls": None}, Outcome.WARN,
         "without calling the tool"),
        ({"content": None, "tool_calls": [_call(arguments="{bad")]}, Outcome.WARN,
         "without calling the tool"),
    ],
)  # fmt: skip
def test_loop_judging(message: dict[str, object], result: Outcome, words: str) -> None:
    verdict = judge_loop(message)
    assert verdict.result is result
    assert words in verdict.message


def test_determinism_passes_same_tokens_warns_on_drift_unless_speculation_explains_it() -> None:
    same = judge_determinism("a b c", "a b c", None)
    assert (same.result, same.figure) == (Outcome.PASS, 1.0)
    drift = judge_determinism("a b c", "a x c", None)
    assert drift.result is Outcome.WARN
    assert "word 2: 'b' then 'x'" in drift.message
    expected = judge_determinism("a b c", "a x c", "dspark")
    assert expected.result is Outcome.PASS
    assert expected.message.startswith("not expected:")
    assert expected.details["cause"] == "speculative decoding (dspark)"
    assert "--speculative-config" in expected.advice
    shorter = judge_determinism("a b c", "a b", None)
    assert shorter.details["first_difference_word"] == 2


def _standing(
    result: str, figure: float, ts: datetime, depths: list[dict[str, object]] | None = None
) -> Standing:
    details = None if depths is None else {"depths": depths}
    return Standing(result, figure, "ratio", ts, details, ts if result != "pass" else None)


def test_a_regression_names_the_last_build_that_passed_and_the_first_that_failed() -> None:
    t1, t2, t3 = (datetime(2026, 12, day, tzinfo=UTC) for day in (1, 3, 4))
    depth = [{"depth": 16_000, "result": "pass", "figure": 1.0}]
    builds = [
        BuildStandings(1, "build A", {
            "copy_depth": _standing("pass", 0.98, t1, [*depth, {"depth": 90_000, "result": "pass", "figure": 0.98}]),
            "tool_calls": _standing("pass", 1.0, t1),
        }),
        BuildStandings(2, "build B", {
            "copy_depth": _standing("fail", 0.15, t2, [*depth, {"depth": 90_000, "result": "fail", "figure": 0.15}]),
            "tool_calls": _standing("pass", 1.0, t2),
        }),
        BuildStandings(3, "build C", {"copy_depth": _standing("fail", 0.2, t3)}),
    ]  # fmt: skip
    found = regressions(builds)
    assert [r.text for r in found] == [
        "copy_depth at 90k: 98% on build A, 15% on build B since 2026-12-03T00:00:00+00:00"
    ]
    fixed = [*builds, BuildStandings(4, "build D", {"copy_depth": _standing("pass", 1.0, t3)})]
    assert regressions(fixed) == []
    never_passed = [BuildStandings(1, "build A", {"loop": _standing("fail", 0.0, t1)})]
    assert regressions(never_passed) == []
