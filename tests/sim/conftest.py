from __future__ import annotations

from pathlib import Path

import pytest

from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import load_scenario
from tests.support.clocks import ManualClock, ManualWallClock
from tests.support.sim_rigs import RigFactory


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def wall() -> ManualWallClock:
    return ManualWallClock()


@pytest.fixture
def make_rig(state_dir: Path, clock: ManualClock, wall: ManualWallClock) -> RigFactory:
    """A rig on the shared state dir and clocks; call again for a "restarted daemon"."""

    def make(scenario: str = "healthy", **kwargs: object) -> SimulatedRig:
        options: dict[str, object] = {"clock": clock, "wall_clock": wall, **kwargs}
        return SimulatedRig(load_scenario(scenario), state_dir, **options)  # type: ignore[arg-type]

    return make
