"""Fixtures of the diagnostics' service tests: a real store (SQLite) and the ``bad-hbm`` rig."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.rig.monitor import RigMonitor
from daemon.store import Store
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import load_scenario


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    yield opened
    opened.close()


@pytest.fixture
def rig(tmp_path: Path) -> SimulatedRig:
    return SimulatedRig(load_scenario("bad-hbm"), tmp_path / "state")


@pytest.fixture
def monitor(rig: SimulatedRig) -> RigMonitor:
    watched = RigMonitor(rig.boot_id(), 3)
    watched.add_sample(rig.host_sources().gpu.snapshot())
    return watched
