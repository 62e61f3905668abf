"""After a reboot no false PowerCapDrift: a reading taken before the bring-up capped the
cards is read again before it is judged.

The poller read every card at 250 W, the bring-up set 180 W a moment later, and the
poller's own apply found them "already" capped: it judged its 250 W reading anyway.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.rig.caps import CapKeeper, CapResult, reading_is_stale
from daemon.store import Store
from hwcheck.sim.backend import SimulatedBackend
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import load_scenario


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    yield opened
    opened.close()


def test_a_reading_the_bring_up_beat_to_the_caps_is_read_again(
    tmp_path: Path, store: Store
) -> None:
    rig = SimulatedRig(load_scenario("healthy"), tmp_path / "state")
    backend = SimulatedBackend(rig)
    rig.reboot()
    keeper = CapKeeper(backend, store, target_w=180.0, tolerance_w=1.0, dry_run=False)
    polled = backend.snapshot()  # the poller's reading: every card at its 250 W default
    assert {card.power_limit_w for card in polled.cards} == {250.0}
    keeper.apply(backend.snapshot(), actor="bring-up")  # the bring-up caps them first
    mine = keeper.apply(polled, actor="fleetd")
    assert {r.outcome for r in mine} == {"already"}
    assert reading_is_stale(mine)  # so the poller reads the cards again before judging
    assert {card.power_limit_w for card in backend.snapshot().cards} == {180.0}


def test_a_cap_that_could_not_be_set_keeps_the_reading() -> None:
    failed = [CapResult(0, 250.0, 180.0, "failed", "no permission")]
    assert not reading_is_stale(failed)
    assert not reading_is_stale([CapResult(0, None, 180.0, "skipped", "card is lost")])
