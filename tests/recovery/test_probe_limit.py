"""CUDA probes coalesced and rate-limited per card (issue 22, point 7).

In-process: the real controller (policy, start path, limiter) over the memory ports of
``tests.support.recovery_ports`` with a rig of 8 cards, a recording engine and a clock
the test moves; the prober counts the probes it is asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.parser import parse_xid
from hwcheck.model import ClassifiedXid
from recovery.controller import RecoveryController
from recovery.facts import Trigger
from recovery.probe_limit import PROBE_MIN_INTERVAL_S
from recovery.settings import RecoverySettings
from recovery.starts import PROBE_FRESH_S
from tests.support.cards import make_card
from tests.support.recovery_fakes import Engine, Ports, drain
from tests.support.recovery_ports import standalone_recovery

STORM = 4052


@dataclass
class HeldEngine(Engine):
    """An engine a person may hold stopped."""

    held: bool = False

    def held_by_a_person(self) -> bool:
        return self.held


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


@dataclass
class Rig:
    controller: RecoveryController
    ports: Ports
    engine: HeldEngine
    clock: Clock


@pytest.fixture
def rig() -> Iterator[Rig]:
    ports = Ports(rig_cards=tuple(make_card(i) for i in range(8)))
    clock = Clock()
    controller, _ = standalone_recovery(RecoverySettings(), ports, clock=clock)
    engine = HeldEngine()
    controller.attach_engine(engine)
    yield Rig(controller, ports, engine, clock)
    controller.close()


def xid_45(card: int) -> ClassifiedXid:
    event = parse_xid(f"NVRM: Xid (PCI:0000:{card + 1:02x}:00): 45, pid=7, name=python3, Ch 0008")
    assert event is not None
    return ClassifiedXid(event, XidCatalogue().classify(event))


def storm(controller: RecoveryController, count: int) -> None:
    for n in range(count):
        controller.on_xid(xid_45(n % 8), n % 8)
    drain(controller)


def test_a_storm_of_xid_45s_with_the_engine_stopped_runs_a_handful_of_probes(rig: Rig) -> None:
    storm(rig.controller, STORM)
    assert rig.ports.probed == [list(range(8))]  # one probe, every card, not 4,053
    rig.clock.now_s += PROBE_MIN_INTERVAL_S / 2
    storm(rig.controller, STORM)
    assert len(rig.ports.probed) == 1  # each card at most once per interval
    rig.clock.now_s += PROBE_MIN_INTERVAL_S
    storm(rig.controller, STORM)
    assert rig.ports.probed == [list(range(8))] * 2
    assert len(rig.ports.audit) == 2  # each probe round recorded once


def test_no_automatic_probe_while_a_person_holds_the_engine_stopped(rig: Rig) -> None:
    rig.engine.held = True
    storm(rig.controller, 100)
    assert rig.ports.probed == []


def test_a_start_still_probes_whatever_the_limit(rig: Rig) -> None:
    storm(rig.controller, 10)
    rig.clock.now_s += PROBE_FRESH_S + 1  # the passed probe is no longer fresh
    assert rig.clock.now_s - 1000.0 < PROBE_MIN_INTERVAL_S
    assert rig.controller.request_start(Trigger.START_REQUEST, "alice").started
    assert rig.ports.probed == [list(range(8))] * 2  # the start needs a fresh answer


def test_a_new_boot_forgets_the_last_boots_probes(rig: Rig) -> None:
    storm(rig.controller, 3)
    rig.controller.new_boot("boot-2")
    storm(rig.controller, 3)
    assert len(rig.ports.probed) == 2
