"""Test helpers shared across test modules (once in tests.recovery.test_controller).

Helpers live only in tests/support: a test never imports another test module.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from hwcheck.cuda_results import CardProbe, ProbeOutcome
from hwcheck.model import CheckResult, GpuSnapshot
from recovery.controller import RecoveryController
from recovery.decisions import Reason
from recovery.facts import EngineCondition
from recovery.ports import Launched, StopKind
from serving.runtime.start_kind import StartFor
from tests.support.recovery_ports import MemoryPorts


@dataclass
class Ports(MemoryPorts):
    """Memory ports with a rig of cards, check results and probe answers to choose."""

    rig_cards: tuple[GpuSnapshot, ...] = ()
    rig_results: tuple[CheckResult, ...] = ()
    wedged: frozenset[int] = frozenset()
    probed: list[list[int]] = field(default_factory=list)
    rejudged: int = 0

    def cards(self) -> tuple[GpuSnapshot, ...]:
        return self.rig_cards

    def results(self) -> tuple[CheckResult, ...]:
        return self.rig_results

    def rejudge(self) -> None:
        self.rejudged += 1

    def probe(self, cards: Sequence[int]) -> tuple[CardProbe, ...]:  # type: ignore[override]
        self.probed.append(list(cards))
        return tuple(
            CardProbe(c, ProbeOutcome.FAILED if c in self.wedged else ProbeOutcome.OK, "E")
            for c in cards
        )


@dataclass
class Engine:
    """An engine port that records; ``running`` says whether a process exists."""

    running: bool = False
    gpus: frozenset[int] | None = None
    calls: list[str] = field(default_factory=list)
    blocks: tuple[Reason, ...] = ()  # a short checkpoint shard (``recipe_blocks``)

    def condition(self) -> EngineCondition:
        return EngineCondition.RUNNING if self.running else EngineCondition.STOPPED

    def held_by_a_person(self) -> bool:
        return False

    def recipe_cards(self) -> frozenset[int] | None:
        return self.gpus

    def recipe_errors(self) -> tuple[str, ...]:
        return ()

    def recipe_blocks(self) -> tuple[Reason, ...]:
        return self.blocks

    def start(self, reason: str, kind: StartFor) -> Launched:
        self.calls.append(f"start {kind}")
        self.running = True
        return Launched(42)

    def restart(self, reason: str) -> None:
        self.calls.append("restart")

    def stop(self, reason: str, kind: StopKind) -> bool:
        self.calls.append(
            f"stop: {reason}" if kind is StopKind.FLEETD else f"stop {kind}: {reason}"
        )
        self.running = False
        return True

    def restart_after(self, delay_s: float, reason: str) -> None:
        self.calls.append(f"restart_after {delay_s:g}")

    def hold(self, reason: str) -> None:
        self.calls.append("hold")

    def stay_stopped(self, reason: str) -> None:
        self.calls.append(f"stay_stopped: {reason}")


def drain(controller: RecoveryController) -> None:
    """Wait until the worker ran everything queued so far."""

    done = threading.Event()
    controller.submit(done.set)
    assert done.wait(10)
