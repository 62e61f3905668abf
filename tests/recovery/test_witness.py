"""Recovery tells the crash black box after the latch, and never waits on it.

A latching Xid: the latch is set before the note is taken; an engine exit: the note
comes after the decision, with the exit's class. A black box that raises never stops
recovery.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.model import ClassifiedXid, XidEvent
from recovery.facts import EngineExit
from recovery.ports import StopNotice
from recovery.settings import RecoverySettings
from serving.runtime.classify import CrashClass
from tests.support.recovery_ports import MemoryPorts, standalone_recovery
from tests.support.waiting import wait_until


@dataclass
class Witness:
    """Notes what it is told, and whether the latch was already set then."""

    ports: MemoryPorts
    notes: list[tuple[StopNotice, bool]] = field(default_factory=list)
    explode: bool = False

    def witness(self, notice: StopNotice) -> None:
        self.notes.append((notice, self.ports.latched is not None))
        if self.explode:
            raise RuntimeError("the black box broke")


def xid31(card_address: str = "0000:61:00.0") -> ClassifiedXid:
    event = XidEvent(
        31, f"NVRM: Xid (PCI:{card_address}): 31, pid=1, MMU Fault", "MMU Fault", card_address
    )
    return ClassifiedXid(event, XidCatalogue().classify(event))


def test_a_latching_xid_is_noted_after_the_latch() -> None:
    ports = MemoryPorts()
    controller, _ = standalone_recovery(RecoverySettings(), ports)
    witness = Witness(ports)
    controller.attach_witness(witness)
    try:
        controller.on_xid(xid31(), 3)
        [(notice, latched)] = witness.notes
        assert latched
        assert (notice.trigger, notice.action, notice.card, notice.xids) == (
            "xid",
            "stop_and_latch",
            3,
            ((31, 3),),
        )
    finally:
        controller.close()


def test_an_exit_is_noted_with_its_class_after_the_decision() -> None:
    ports = MemoryPorts()
    controller, _ = standalone_recovery(RecoverySettings(), ports)
    witness = Witness(ports)
    controller.attach_witness(witness)
    try:
        controller.on_engine_exit(EngineExit(CrashClass.KV_OOM, 1, None, "exited with 1"))
        wait_until(lambda: witness.notes, 10, "the exit's note")
        notice, _ = witness.notes[0]
        assert notice.trigger == "engine_exit" and notice.crash_class == "kv_oom"
        assert ports.audit, "the decision was carried out before the note"
    finally:
        controller.close()


def test_a_broken_black_box_never_stops_recovery() -> None:
    ports = MemoryPorts()
    controller, _ = standalone_recovery(RecoverySettings(), ports)
    controller.attach_witness(Witness(ports, explode=True))
    try:
        controller.on_xid(xid31(), 3)
        assert ports.latched is not None
    finally:
        controller.close()
