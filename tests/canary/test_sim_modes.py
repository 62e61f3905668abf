"""The simulated engine's canary modes as scenario keys: parsed, passed as flags, read back."""

from __future__ import annotations

import random

import pytest

from serving.canary import copy
from serving.sim.options import parse_options
from serving.sim.replies import compose_reply
from serving.sim.scenario import (
    EngineScenarioError,
    parse_engine_scenario,
    simulated_engine_args,
)


def test_scenario_modes_reach_the_engine_as_flags() -> None:
    scenario = parse_engine_scenario(
        {
            "reasoning_field": "reasoning",
            "prefill_tokens_per_s": 400.0,
            "log_lines": [{"after_s": 1.5, "text": "WARNING repetition tripwire fired"}],
        },
        "test.toml",
    )
    options = parse_options(["serve", "m", *simulated_engine_args(scenario)])
    assert options.reasoning_field == "reasoning"
    assert options.prefill_tokens_per_s == 400.0
    assert [(line.after_s, line.text) for line in options.log_lines] == [
        (1.5, "WARNING repetition tripwire fired")
    ]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"reasoning_field": "thoughts"}, "engine.reasoning_field: one of both, reasoning_content"),
        ({"log_lines": "x"}, "engine.log_lines: expected a list of tables"),
        ({"log_lines": [{"text": "a\nb"}]}, "engine.log_lines[0].text: expected one line"),
        ({"prefill_tokens_per_s": 0}, "engine.prefill_tokens_per_s: must be positive"),
    ],
)
def test_bad_mode_values_are_one_line_errors(table: dict[str, object], message: str) -> None:
    with pytest.raises(EngineScenarioError, match=r"^scenario t\.toml: ") as caught:
        parse_engine_scenario(table, "t.toml")
    assert message in str(caught.value)


@pytest.mark.parametrize("pct", [0, 20, 50])
def test_the_engine_mangles_exactly_the_set_share_of_copied_identifiers(pct: int) -> None:
    options = parse_options(["serve", "m", "--sim-corrupt-identifiers-pct", str(pct)])
    idents = copy.make_identifiers(random.Random(2), 40)
    request = {"messages": [{"role": "user", "content": copy.copy_prompt(idents)}]}
    reply = compose_reply(request, options, random.Random(9))
    assert reply.content is not None
    assert copy.score_copy(idents, reply.content).exact == 40 - round(40 * pct / 100)
