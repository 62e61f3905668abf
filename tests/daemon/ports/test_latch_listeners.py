"""Recovery's latch port tells its listeners at once: the verdict first, then the alerts.

``StoreLatch`` (``daemon/ports/parts.py``) over a real latch holder, latch file and
SQLite store; fleetd subscribes ``RigJudge.latch_changed`` and
``AlertEngine.latch_changed`` where it builds them. The store catches up later, through
``defer``: a listener hears of the latch before any store write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.alerts.engine import AlertEngine, AlertPolicy
from daemon.ports.latch import LatchFile, LatchState
from daemon.ports.parts import RecoveryMemory, StoreLatch
from daemon.store import Store
from hwcheck.model import Advice, LatchWaiver


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    yield opened
    opened.close()


def test_a_set_and_a_clear_reach_every_listener_in_order_before_the_store(
    store: Store, tmp_path: Path
) -> None:
    state = LatchState(LatchFile(tmp_path / "latch.json"), store)
    state.load("boot-1")
    deferred: list[Callable[[], None]] = []
    port = StoreLatch(state, RecoveryMemory(store), lambda: "boot-1", deferred.append)
    heard: list[tuple[str, bool, bool]] = []
    port.add_change_listener(lambda required: heard.append(("judge", required, bool(deferred))))
    port.add_change_listener(lambda required: heard.append(("alerts", required, bool(deferred))))
    port.set_latch("Xid 79 on card 1", Advice.WARM_REBOOT, card=1)
    assert heard == [("judge", True, False), ("alerts", True, False)]  # before the store
    assert store.get_latch() is None
    deferred.pop()()
    assert store.get_latch() is not None
    waiver = LatchWaiver("swapped the riser", datetime.now(UTC))
    assert port.clear_latch("swapped the riser", "ops", waiver)
    assert heard[2:] == [("judge", False, False), ("alerts", False, False)]


def test_the_alert_engine_looks_again_when_the_latch_moves(store: Store) -> None:
    engine = AlertEngine(store, [], AlertPolicy(0.0, 3600.0), lambda: None, lambda: None)
    woken: list[bool] = []
    engine.wake = lambda: woken.append(True)  # type: ignore[method-assign]
    engine.latch_changed(True)
    engine.latch_changed(False)
    assert woken == [True, True]
