"""A simulated rebuild can switch a defect off: ``0`` and ``false`` are not ignored.

``POST /api/v1/sim/rebuild {"engine": {"drift": false}}`` gave no flag for the key (its
"off" value has none), so the scenario's ``--sim-drift`` still won and a fixed build could
not be simulated. The rebuild now tells the engine to put such a key back to its default.
"""

from __future__ import annotations

import pytest

from serving.sim.options import parse_options
from serving.sim.scenario import EngineScenarioError, override_args

SCENARIO = [
    "serve", "model", "--sim-drift", "--sim-leak-dsml",
    "--sim-corrupt-identifiers-pct", "30", "--sim-loop-after-tokens", "100000",
]  # fmt: skip


def test_a_rebuild_at_the_off_values_switches_the_scenarios_defects_off() -> None:
    broken = parse_options(SCENARIO)
    assert broken.defects.drift and broken.leak_dsml and broken.corrupt_identifiers_pct == 30
    fixed_build = override_args(
        {"drift": False, "leak_dsml": False, "corrupt_identifiers_pct": 0}, "rebuild"
    )
    fixed = parse_options([*SCENARIO, *fixed_build])
    assert not fixed.defects.drift
    assert not fixed.leak_dsml
    assert fixed.corrupt_identifiers_pct == 0
    # A key the rebuild did not give keeps the scenario's value.
    assert fixed.defects.loop_after_tokens == 100_000


def test_a_rebuild_that_sets_a_value_still_sets_it() -> None:
    args = override_args({"corrupt_identifiers_pct": 12}, "rebuild")
    assert "--sim-unset" not in args
    assert parse_options([*SCENARIO, *args]).corrupt_identifiers_pct == 12


def test_a_rebuild_cannot_change_the_checkpoint_on_disk() -> None:
    """``checkpoint`` is the rig's disk: a rebuilt image is refused it in one line."""
    with pytest.raises(EngineScenarioError, match=r"engine\.checkpoint: the checkpoint is on"):
        override_args({"checkpoint": "whole"}, "rebuild")
