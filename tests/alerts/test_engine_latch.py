"""The latch alert reads the latch in force from memory, not the store (issue 22).

In-process: a real store (SQLite file) that has no latch yet, as while it cannot write;
the latch in force is set in its one holder, ``LatchState``, as fleetd's recovery sets it
(memory and ``latch.json`` at once, the store only when its writer catches up).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.alerts.engine import AlertEngine
from daemon.ports.latch import LatchFile, LatchState
from daemon.store import Store
from daemon.store.alerts import AlertPolicy
from hwcheck.model import Advice


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    yield opened
    opened.close()


def test_the_latch_alert_fires_from_memory_before_the_store_has_the_latch(
    store: Store, tmp_path: Path
) -> None:
    latch = LatchState(LatchFile(tmp_path / "latch.json"), store)
    latch.load("boot-1")
    engine = AlertEngine(store, [], AlertPolicy(0.0, 3600.0), lambda: None, latch.in_force)
    engine.step()
    assert store.list_alerts(10, None) == []
    latch.set("Xid 79 on card 1", "xid", Advice.WARM_REBOOT)
    engine.step()
    assert store.get_latch() is None  # the store never had it
    [alert] = store.list_alerts(10, None)
    assert alert.status == "firing"
    assert "Reboot required: Xid 79 on card 1" in alert.summary
    latch.new_boot("boot-2")
    engine.step()
    [alert] = store.list_alerts(10, None)
    assert alert.status == "resolved"
