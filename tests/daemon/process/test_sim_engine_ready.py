"""``CMPFLEET_SIM_ENGINE_READY_AFTER_S``: the simulated engine's load time for scenarios that
do not set their own (the suite runs every simulated engine with 1 s instead of 5 s)."""

from __future__ import annotations

import pytest

from daemon.startup import SIM_ENGINE_READY_VARIABLE, StartupError, sim_engine_table
from serving.sim.scenario import parse_engine_scenario


def test_the_environment_sets_the_load_time_of_a_scenario_without_one() -> None:
    table = sim_engine_table({}, {SIM_ENGINE_READY_VARIABLE: "0.5"})
    assert parse_engine_scenario(table, "healthy").ready_after_s == 0.5


def test_a_scenario_that_sets_its_load_time_keeps_it() -> None:
    table = sim_engine_table({"ready_after_s": 30}, {SIM_ENGINE_READY_VARIABLE: "1"})
    assert parse_engine_scenario(table, "slow-start").ready_after_s == 30


def test_without_the_variable_the_scenario_default_holds() -> None:
    assert parse_engine_scenario(sim_engine_table({}, {}), "healthy").ready_after_s == 5.0


@pytest.mark.parametrize("raw", ["soon", "-1", "inf", "nan", "1e308"])
def test_a_bad_value_is_one_line_naming_the_variable(raw: str) -> None:
    with pytest.raises(StartupError) as refused:
        sim_engine_table({}, {SIM_ENGINE_READY_VARIABLE: raw})
    message = str(refused.value)
    assert message.startswith(f"environment {SIM_ENGINE_READY_VARIABLE}: seconds from 0 to 3600")
    assert repr(raw) in message and "\n" not in message
