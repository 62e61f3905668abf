"""A card's passport lists the crash black box's verdicts that named it, by serial.

Real store (SQLite) and the simulated rig's snapshot; the crash event is recorded as the
black box records it (``daemon.evidence.recorder``: kind ``crash``, the card's serial).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from daemon.rig.monitor import RigMonitor
from daemon.rig.passport import Passports
from daemon.store import Store
from hwcheck.model import EventKind, RigSnapshot, Severity
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import load_scenario
from serving.errors import NotFound


@contextmanager
def healthy_rig(tmp_path: Path) -> Iterator[tuple[RigSnapshot, Store, RigMonitor]]:
    """The simulated healthy rig's snapshot, stored and in a monitor."""
    rig = SimulatedRig(load_scenario("healthy"), tmp_path / "state")
    snapshot = rig.host_sources().gpu.snapshot()
    store = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    try:
        store.record_samples(snapshot)
        monitor = RigMonitor(rig.boot_id(), 3)
        monitor.add_sample(snapshot)
        yield snapshot, store, monitor
    finally:
        store.close()


def test_a_crash_naming_the_cards_serial_is_in_its_passport_only(tmp_path: Path) -> None:
    with healthy_rig(tmp_path) as (snapshot, store, monitor):
        card3 = snapshot.cards[3]
        details = {
            "evidence": "bundle",
            "bundle_id": "20261206-0001",
            "crash_class": "cuda_fault",
            "verdict": "spec_verify_fault",
            "card": 3,
            "serial": card3.serial,
        }
        store.record_event(
            EventKind.CRASH, Severity.WARNING, "crash 20261206-0001", details=details
        )
        passports = Passports(store, monitor)
        assert [c["bundle_id"] for c in passports.passport("3")["crashes"]] == ["20261206-0001"]
        assert passports.passport("2")["crashes"] == []


def test_a_name_of_unicode_digits_is_no_card_not_a_crash(tmp_path: Path) -> None:
    """``str.isdigit`` holds for "²", which ``int`` refuses: the schema fuzz found a 500."""
    with healthy_rig(tmp_path) as (snapshot, store, monitor):
        passports = Passports(store, monitor)
        assert passports.passport("3")["uuid"] == snapshot.cards[3].uuid
        with pytest.raises(NotFound):
            passports.passport("²")
