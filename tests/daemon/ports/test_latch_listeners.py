"""Recovery's latch port tells its listeners at once: the verdict first, then the alerts.

``StoreLatch`` (``daemon/ports/parts.py``) over a real latch holder, latch file and
SQLite store; fleetd subscribes ``RigJudge.latch_changed`` and
``AlertEngine.latch_changed`` where it builds them. The store catches up later, through
``defer``: a listener hears of the latch before any store write.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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


def test_a_clear_between_a_catch_ups_read_and_its_store_write_stays_cleared(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's catch-up read the latch, a person cleared it, the catch-up wrote it.

    Without the two writers ordered, the store kept the latch the clear had removed and the
    next read adopted it again: a cleared Xid latch came back by itself. The store's two
    calls are held open here at the worst moments (each waits a moment for the other side).
    """
    state = LatchState(LatchFile(tmp_path / "latch.json"), store)
    state.load("boot-1")
    state.set("Xid 62 (GSP) on card 3", "xid", Advice.COLD_POWER_CYCLE, card=3)
    store_cleared, catch_up_done = threading.Event(), threading.Event()
    real_set, real_clear = store.set_latch, store.clear_latch

    def set_after_the_clear(*args: Any, **kwargs: Any) -> Any:
        store_cleared.wait(0.5)  # the clear's store write first, when it can go first
        return real_set(*args, **kwargs)

    def clear_then_linger(*args: Any, **kwargs: Any) -> Any:
        cleared = real_clear(*args, **kwargs)
        store_cleared.set()
        catch_up_done.wait(0.5)  # the catch-up checks the memory before the clear's write
        return cleared

    monkeypatch.setattr(store, "set_latch", set_after_the_clear)
    monkeypatch.setattr(store, "clear_latch", clear_then_linger)
    writer = threading.Thread(target=state.catch_up)
    writer.start()
    time.sleep(0.05)  # the catch-up has read the latch and waits in the store
    person = threading.Thread(target=state.clear, args=("swapped the card", "ops", "operator"))
    person.start()
    writer.join(5)
    catch_up_done.set()
    person.join(5)
    monkeypatch.undo()
    assert state.in_force() is None
    assert store.get_latch() is None
    assert state.latch() is None  # nothing stored to adopt again
    state.catch_up()
    assert state.in_force() is None


def test_a_clear_that_finds_the_store_started_afresh_does_not_wait_on_itself(
    tmp_path: Path,
) -> None:
    """``fleet.db`` deleted under fleetd: the clear's write starts it afresh, and the fresh
    store's listener (the latch written again) runs in that same thread, under its lock."""
    path = tmp_path / "fleet.db"
    store = Store.open(f"sqlite:///{path}")
    store.watch_file(path)
    try:
        state = LatchState(LatchFile(tmp_path / "latch.json"), store)
        state.load("boot-1")
        state.set("Xid 79 on card 1", "xid", Advice.WARM_REBOOT, card=1)
        state.catch_up()
        assert store.get_latch() is not None
        path.unlink()  # the next write notices and starts a fresh file
        done = threading.Event()

        def clear() -> None:
            state.clear("swapped the riser", "ops", "operator")
            done.set()

        threading.Thread(target=clear, daemon=True).start()
        assert done.wait(10), "the clear waited on its own lock"
        assert state.in_force() is None
        assert store.get_latch() is None
    finally:
        store.close()
