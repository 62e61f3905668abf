"""The latch alert reads the latch in force from memory, not the store (issue 22).

In-process: a real store (SQLite file) that has no latch yet, as while it cannot write;
the latch in force is set in the mirror fleetd's recovery sets.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from daemon.alerts.engine import AlertEngine
from daemon.metrics_source import LatchMirror
from daemon.store import Latch, Store
from daemon.store.alerts import AlertPolicy, SinkRoute
from hwcheck.model import Advice, Severity


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    yield opened
    opened.close()


def test_the_latch_alert_fires_from_memory_before_the_store_has_the_latch(store: Store) -> None:
    mirror = LatchMirror()
    engine = AlertEngine(store, [], AlertPolicy(0.0, 3600.0), lambda: None, mirror.get)
    engine.step()
    assert store.list_alerts(10, None) == []
    mirror.set(Latch("Xid 79 on card 1", "xid", datetime.now(UTC), Advice.WARM_REBOOT))
    engine.step()
    assert store.get_latch() is None  # the store never had it
    [alert] = store.list_alerts(10, None)
    assert alert.status == "firing"
    assert "Reboot required: Xid 79 on card 1" in alert.summary
    mirror.set(None)
    engine.step()
    [alert] = store.list_alerts(10, None)
    assert alert.status == "resolved"


def test_the_escalation_to_a_cold_power_cycle_is_news(store: Store) -> None:
    """Xid 31, a warm reboot, Xid 31 again within the resolve window: the latch comes back
    asking a cold power cycle. The phone hears it, and the stored alert advises it."""
    mirror = LatchMirror()
    sink = SinkRoute("phone", Severity.WARNING)
    engine = AlertEngine(store, [sink], AlertPolicy(60.0, 3600.0), lambda: None, mirror.get)
    t0 = datetime.now(UTC)
    engine.step(t0)
    mirror.set(Latch("Xid 31 on card 1", "recovery", t0, Advice.WARM_REBOOT))
    engine.step(t0 + timedelta(seconds=1))
    mirror.set(None)  # the warm reboot clears it; its resolve waits the window
    engine.step(t0 + timedelta(seconds=30))
    again = "Xid 31 on card 1 (again after the warm reboot)"
    mirror.set(Latch(again, "recovery", t0, Advice.COLD_POWER_CYCLE))
    engine.step(t0 + timedelta(seconds=40))

    (alert,) = store.list_alerts(10, None)
    notes = store.notifications_of([alert.id])
    assert [n.payload["advice"][:22] for n in notes] == [
        "Reboot the host: fleet",
        "Power the rig off for ",
    ]
    assert alert.status == "firing" and alert.advice.startswith("Power the rig off for about 30 s")
