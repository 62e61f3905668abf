"""The cap keeper sets each card's cap once, however many callers read the cards before it.

After a reboot the poller and the bring-up both read every card at its default limit and
both asked for the cap: four of eight cards were capped twice. A real simulated rig (its
backend keeps what was set) and a real store count what was applied.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.rig.caps import CapKeeper
from daemon.store import Store
from hwcheck.sim.backend import SimulatedBackend
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import load_scenario


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    yield opened
    opened.close()


def applied(store: Store) -> list[str]:
    rows = store.list_audit(limit=100)
    return sorted(str(row.target) for row in rows if row.outcome == "applied")


def test_each_card_is_capped_once_after_a_reboot(tmp_path: Path, store: Store) -> None:
    rig = SimulatedRig(load_scenario("healthy-8"), tmp_path / "state")
    backend = SimulatedBackend(rig)
    rig.reboot()  # every limit back at the card's default, 250 W
    keeper = CapKeeper(backend, store, target_w=180.0, tolerance_w=1.0, dry_run=False)
    stale = backend.snapshot()  # both callers read the cards before either capped them
    assert all(keeper.off_target(card) for card in stale.cards)

    first = keeper.apply(stale, actor="bring-up")
    second = keeper.apply(stale, actor="fleetd")

    assert [r.outcome for r in first] == ["applied"] * 8
    assert [r.outcome for r in second] == ["already"] * 8
    assert len(applied(store)) == 8
    assert {card.power_limit_w for card in backend.snapshot().cards} == {180.0}


def test_callers_at_the_same_moment_cap_each_card_once(tmp_path: Path, store: Store) -> None:
    rig = SimulatedRig(load_scenario("healthy-8"), tmp_path / "state")
    backend = SimulatedBackend(rig)
    rig.reboot()
    keeper = CapKeeper(backend, store, target_w=180.0, tolerance_w=1.0, dry_run=False)
    readings = [backend.snapshot() for _ in range(4)]
    callers = [
        threading.Thread(target=keeper.apply, args=(reading, f"caller-{n}"))
        for n, reading in enumerate(readings)
    ]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(30)
    assert len(applied(store)) == 8
