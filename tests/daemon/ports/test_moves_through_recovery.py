"""fleetd's engine moves only through recovery: its supervisor carries recovery's guard.

A fleetd built in-process (not started: no poll, no engine launched) on the simulated
rig: a start or stop asked of its engine supervisor directly, around recovery's
controller, raises ``MoveOutsideRecovery`` and nothing moves. The guard itself, and the
controller's paths through it, are ``tests/recovery/test_engine_moves.py``'s; the person's
stop, the switch's and the simulated reboot's, end to end, are the e2e modules' (each
would raise here if it went around recovery).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.config import load_settings
from daemon.engine.profiles import simulated_recipe
from daemon.runtime import Daemon
from daemon.sdnotify import Notifier
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import load_scenario
from recovery.moves import MoveOutsideRecovery
from serving.runtime.states import ServingState
from serving.sim.scenario import parse_engine_scenario
from tests.support.fleetd import free_port


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    settings = load_settings(
        None, environ={}, overrides={"web": {"listen": f"127.0.0.1:{free_port()}"}}
    )
    state = tmp_path / "state"
    rig = SimulatedRig(load_scenario("healthy"), state)
    recipe = simulated_recipe(parse_engine_scenario({}, "healthy"))
    built = Daemon(settings, state, rig.host_sources(), rig, Notifier({}), recipe=recipe)
    try:
        yield built
    finally:
        built.shutdown(announce=False)


def test_fleetds_engine_supervisor_refuses_every_move_made_around_recovery(
    daemon: Daemon,
) -> None:
    assert daemon.engine is not None
    supervisor = daemon.engine.supervisor
    for move in (
        lambda: supervisor.start("around recovery"),
        lambda: supervisor.stop("around recovery"),
        lambda: supervisor.restart("around recovery"),
        lambda: supervisor.stay_stopped("around recovery"),
    ):
        with pytest.raises(MoveOutsideRecovery):
            move()
    assert supervisor.status().state is ServingState.STOPPED
