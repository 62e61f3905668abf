"""One page per cause: the stock kernel, the latched fault, the deep round.

``stock-kernel`` sent HostKernelDrift, Bar1Lost and P2pLost; ``xid31`` and ``cuda-wedge``
RebootRequired plus the Xid or the probe; one deep round three canary criticals. The
inhibit table folds each symptom into its cause's notification (``also_affected``),
whatever order the events of one pass came in.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.alerts.engine import AlertEngine
from daemon.alerts.inhibit import INHIBITS, causes_first
from daemon.store import Latch, Store
from daemon.store.alerts import AlertPolicy, AlertSignal, SinkRoute
from hwcheck.model import Advice, Severity

PHONE = SinkRoute("phone", Severity.WARNING)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    yield opened
    opened.close()


def _signal(fingerprint: str, name: str, card: int | None = None) -> AlertSignal:
    labels: dict[str, object] = {"alertname": name}
    if card is not None:
        labels["card"] = card
    return AlertSignal(
        fingerprint,
        fire=True,
        rule="check",
        severity=Severity.CRITICAL,
        summary=f"{name} summary",
        advice=f"{name} advice",
        labels=labels,
    )


def _pages(store: Store) -> list[dict[str, object]]:
    alerts = store.list_alerts(50, None)
    notes = store.notifications_of([a.id for a in alerts])
    return [n.payload for n in notes]


def _engine(store: Store, latch: Latch | None = None) -> AlertEngine:
    engine = AlertEngine(
        store, [PHONE], AlertPolicy(60.0, 3600.0, INHIBITS), lambda: None, lambda: latch
    )
    return engine


def test_the_stock_kernel_is_one_page_with_bar1_and_p2p_also_affected(store: Store) -> None:
    engine = _engine(store)
    engine.step()
    # BAR1's and P2P's checks come before the kernel's in one poll's events.
    for card in (0, 1):
        engine.add(_signal(f"check:bar1:{card}", "Bar1Lost", card))
    engine.add(_signal("check:p2p:rig", "P2pLost"))
    engine.add(_signal("check:host_kernel:rig", "HostKernelDrift"))
    engine.step()
    (page,) = _pages(store)
    assert page["summary"] == "HostKernelDrift summary"
    assert sorted(page["also_affected"]) == [  # type: ignore[arg-type]
        "Bar1Lost summary",
        "Bar1Lost summary",
        "P2pLost summary",
    ]
    assert len(store.list_alerts(50, "firing")) == 4  # every alert kept, one sent


@pytest.mark.parametrize("fault", ["XidHardware", "CheckCudaProbe"])
def test_a_latched_fault_is_one_page_the_latchs(store: Store, fault: str) -> None:
    latch = Latch("Xid 31 on card 1", "recovery", datetime.now(UTC), Advice.WARM_REBOOT, 1)
    engine = _engine(store, latch)
    engine.add(_signal(f"{fault}:card1", fault, 1))
    engine.step()
    (page,) = _pages(store)
    assert page["labels"]["alertname"] == "RebootRequired"  # type: ignore[index]
    assert page["also_affected"] == [f"{fault} summary"]


def test_one_deep_round_is_one_page(store: Store) -> None:
    engine = _engine(store)
    engine.step()
    for name in ("CanaryRecall", "CanaryLoop", "CanaryCopyDepth"):
        engine.add(_signal(f"canary:{name}", name))
    engine.step()
    (page,) = _pages(store)
    assert page["summary"] == "CanaryCopyDepth summary"
    assert sorted(page["also_affected"]) == ["CanaryLoop summary", "CanaryRecall summary"]  # type: ignore[arg-type]


def test_causes_first_keeps_one_alerts_fire_resolve_fire_in_order() -> None:
    drift = _signal("check:host_kernel:rig", "HostKernelDrift")
    bar1 = _signal("check:bar1:0", "Bar1Lost", 0)
    resolve = AlertSignal("check:host_kernel:rig", fire=False)
    assert causes_first([bar1, drift], INHIBITS) == [drift, bar1]
    assert causes_first([bar1, drift, resolve, drift], INHIBITS) == [bar1, drift, resolve, drift]
