"""The ``[engine]`` part of a scenario: parsed by serving, errors in one line naming file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwcheck.sim.scenario import load_scenario
from serving.sim.options import parse_options
from serving.sim.scenario import (
    EngineScenario,
    EngineScenarioError,
    parse_engine_scenario,
    simulated_engine_args,
)


def test_engine_corrupt_exposes_typed_engine_fields() -> None:
    scenario = load_scenario("engine-corrupt")
    engine = parse_engine_scenario(scenario.engine, scenario.source)
    assert engine.corrupt_identifiers_pct == 20.0
    assert engine.leak_dsml is True
    assert engine.ready_after_s == 5.0
    assert engine.crash_after_s is None
    assert engine.hang_after_s is None
    assert engine.ignore_sigint is False
    assert engine.tokens_per_s > 0


def test_a_scenario_without_engine_table_gets_the_defaults() -> None:
    scenario = load_scenario("healthy")
    assert parse_engine_scenario(scenario.engine, scenario.source) == EngineScenario()


def test_a_file_engine_table_is_typed(tmp_path: Path) -> None:
    path = tmp_path / "custom.toml"
    path.write_text(
        "card_count = 1\n[engine]\nready_after_s = 0.5\ncrash_after_s = 30\n"
        "ignore_sigint = true\ntokens_per_s = 12.5\n",
        encoding="utf-8",
    )
    scenario = load_scenario(str(path))
    engine = parse_engine_scenario(scenario.engine, scenario.source)
    assert engine == EngineScenario(
        ready_after_s=0.5, crash_after_s=30.0, ignore_sigint=True, tokens_per_s=12.5
    )


def test_the_flags_are_the_ones_the_simulated_engine_reads() -> None:
    engine = EngineScenario(
        ready_after_s=0.5,
        crash_after_s=30.0,
        hang_after_s=40.0,
        ignore_sigint=True,
        ignore_signals=True,
        tokens_per_s=12.5,
        corrupt_identifiers_pct=20.0,
        leak_dsml=True,
    )
    options = parse_options(["serve", "model", *simulated_engine_args(engine)])
    assert options.ready_after_s == 0.5
    assert options.crash_after_s == 30.0
    assert options.hang_after_s == 40.0
    assert options.ignore_sigint is True
    assert options.ignore_signals is True
    assert options.tokens_per_s == 12.5
    assert options.corrupt_identifiers_pct == 20.0
    assert options.leak_dsml is True
    assert options.ignored == ()


BAD_TABLES = [
    pytest.param(
        "corrupt_identifiers_pct = 120\n",
        "engine.corrupt_identifiers_pct: must be 0 to 100",
        id="pct-range",
    ),
    pytest.param("speed = 1\n", "engine.speed: unknown key", id="unknown-engine-key"),
    pytest.param("tokens_per_s = 0\n", "engine.tokens_per_s: must be positive", id="tokens"),
    pytest.param("crash_after_s = -1\n", "engine.crash_after_s: must be 0 to 31536000", id="neg"),
    pytest.param("ready_after_s = 1e308\n", "engine.ready_after_s: must be 0 to", id="huge"),
    pytest.param("tokens_per_s = inf\n", "engine.tokens_per_s: expected a finite", id="inf"),
    pytest.param(
        'hang_after_s = "soon"\n', 'engine.hang_after_s: expected a number, got "soon"', id="str"
    ),
    pytest.param(
        "leak_dsml = 1\n", "engine.leak_dsml: expected true or false, got 1", id="int-bool"
    ),
]


@pytest.mark.parametrize(("text", "expected"), BAD_TABLES)
def test_bad_engine_tables_fail_with_one_line_naming_file_and_key(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(f"card_count = 1\n[engine]\n{text}", encoding="utf-8")
    scenario = load_scenario(str(path))  # the hardware part is fine
    with pytest.raises(EngineScenarioError) as caught:
        parse_engine_scenario(scenario.engine, scenario.source)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"scenario {path}: ")
    assert expected in message
