"""The latch alert reads the latch in force from memory, not the store (issue 22).

In-process: a real store (SQLite file) that has no latch yet, as while it cannot write;
the latch in force is set in its one holder, ``LatchState``, as fleetd's recovery sets it
(memory and ``latch.json`` at once, the store only when its writer catches up).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from daemon.alerts.engine import AlertEngine
from daemon.ports.latch import LatchFile, LatchState
from daemon.store import Latch, Store
from daemon.store.alerts import AlertPolicy, SinkRoute
from hwcheck.model import Advice, Severity


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


def test_the_escalation_to_a_cold_power_cycle_is_news(store: Store) -> None:
    """Xid 31, a warm reboot, Xid 31 again within the resolve window: the latch comes back
    asking a cold power cycle. The phone hears it, and the stored alert advises it."""
    in_force: list[Latch | None] = [None]  # the latch holder's answer, set by the test
    sink = SinkRoute("phone", Severity.WARNING)
    engine = AlertEngine(
        store, [sink], AlertPolicy(60.0, 3600.0), lambda: None, lambda: in_force[0]
    )
    t0 = datetime.now(UTC)
    engine.step(t0)
    in_force[0] = Latch("Xid 31 on card 1", "recovery", t0, Advice.WARM_REBOOT)
    engine.step(t0 + timedelta(seconds=1))
    in_force[0] = None  # the warm reboot clears it; its resolve waits the window
    engine.step(t0 + timedelta(seconds=30))
    again = "Xid 31 on card 1 (again after the warm reboot)"
    in_force[0] = Latch(again, "recovery", t0, Advice.COLD_POWER_CYCLE)
    engine.step(t0 + timedelta(seconds=40))

    (alert,) = store.list_alerts(10, None)
    notes = store.notifications_of([alert.id])
    assert [n.payload["advice"][:22] for n in notes] == [
        "Reboot the host: fleet",
        "Power the rig off for ",
    ]
    assert alert.status == "firing" and alert.advice.startswith("Power the rig off for about 30 s")
