"""Test helpers shared across test modules (once in tests.recovery.test_executors).

Helpers live only in tests/support: a test never imports another test module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hwcheck.model import Advice, LatchWaiver
from recovery.decisions import (
    Reason,
)
from recovery.facts import EngineCondition, LatchFact
from recovery.ports import Launched, StopKind
from serving.errors import Refused
from serving.runtime.start_kind import StartFor
from tests.support.recovery_ports import MemoryPorts


@dataclass
class Rig(MemoryPorts):
    """Records every call; ``stops`` says whether the engine agrees to stop."""

    stops: bool = True
    refuse_start: str | None = None
    refuse_reasons: tuple[Reason, ...] = ()
    calls: list[str] = field(default_factory=list)
    power_cycle: str | None = None
    missing: str | None = None  # why the host command cannot run here
    next_boot: str | None = None  # the default entry when it is not the baseline kernel
    blocks: tuple[Reason, ...] = ()  # a short checkpoint shard (``recipe_blocks``)

    # EnginePort
    def condition(self) -> EngineCondition:
        return EngineCondition.STOPPED

    def held_by_a_person(self) -> bool:
        return False

    def recipe_cards(self) -> frozenset[int] | None:
        return None

    def recipe_errors(self) -> tuple[str, ...]:
        return ()

    def recipe_blocks(self) -> tuple[Reason, ...]:
        return self.blocks

    def start(self, reason: str, kind: StartFor) -> Launched:
        if self.refuse_start is not None:
            raise Refused(self.refuse_start, "port_in_use", self.refuse_reasons)
        self.calls.append(f"start {kind}: {reason}")
        return Launched(1234)

    def restart(self, reason: str) -> None:
        self.calls.append(f"restart: {reason}")

    def stop(self, reason: str, kind: StopKind) -> bool:
        self.calls.append(
            f"stop: {reason}" if kind is StopKind.FLEETD else f"stop {kind}: {reason}"
        )
        return self.stops

    def restart_after(self, delay_s: float, reason: str) -> None:
        self.calls.append(f"restart_after {delay_s:g}")

    def hold(self, reason: str) -> None:
        self.calls.append(f"hold: {reason}")

    def stay_stopped(self, reason: str) -> None:
        self.calls.append(f"stay_stopped: {reason}")

    # LatchPort
    def latch(self) -> LatchFact | None:
        return self.latched

    def set_latch(self, reason: str, advice: Advice, card: int | None = None) -> None:
        self.calls.append("set_latch")
        self.latched = self.latched or LatchFact(reason, advice, card)

    def clear_latch(self, reason: str, by: str, waiver: LatchWaiver) -> bool:
        was_set = self.latched is not None
        self.latched = None
        self.calls.append(f"clear_latch by {by}")
        return was_set

    # HostCommands
    def describe(self, cold: bool) -> str | None:
        return self.power_cycle if cold else "systemctl reboot"

    def run(self, cold: bool) -> str:
        self.calls.append("power_cycle" if cold else "reboot")
        return str(self.describe(cold))

    def unavailable(self, cold: bool) -> str | None:
        return self.missing

    def wrong_boot(self) -> str | None:
        return self.next_boot
