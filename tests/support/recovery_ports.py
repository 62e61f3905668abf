"""Recovery's controller for a supervisor on its own: its ports kept in memory.

The supervisor tests (and ``bench/supervisor.py``) run the real controller (the real
policy, streak, executors and start path) against a real supervisor, with the ports
fleetd would give it (the rig, the latch, the audit trail, the host, the history) held
in memory: a healthy rig with no cards to probe, nothing latched, nothing rebooted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from daemon.engine.recovery_port import ReportsToRecovery, SupervisedEngine
from hwcheck.cuda_results import CardProbe, ProbeRound
from hwcheck.model import Advice, CheckResult, ClassifiedXid, GpuSnapshot, LatchWaiver
from recovery.controller import RecoveryController
from recovery.decisions import Reason
from recovery.facts import LatchFact
from recovery.history import FaultHistory
from recovery.settings import RecoverySettings
from serving.runtime.supervisor import Supervisor


@dataclass
class MemoryPorts:
    """Every port but the engine's, in memory (what a test may read back)."""

    latched: LatchFact | None = None
    audit: list[tuple[str, str, str, str]] = field(default_factory=list)
    document: dict[str, Any] | None = None

    # RigView: a healthy rig with no cards (so no CUDA probe before a start).
    def results(self) -> tuple[CheckResult, ...]:
        return ()

    def cards(self) -> tuple[GpuSnapshot, ...]:
        return ()

    def xids(self) -> tuple[ClassifiedXid, ...]:
        return ()

    def note_probes(self, probes: ProbeRound) -> None:
        """Nothing judges them here."""

    def rejudge(self) -> None:
        """No checks here."""

    # LatchPort
    def latch(self) -> LatchFact | None:
        return self.latched

    def set_latch(self, reason: str, advice: Advice, card: int | None = None) -> None:
        self.latched = self.latched or LatchFact(reason, advice, card)

    def clear_latch(self, reason: str, by: str, waiver: LatchWaiver) -> bool:
        was_set, self.latched = self.latched is not None, None
        return was_set

    # AuditTrail
    def record(
        self,
        actor: str,
        action: str,
        reason: str,
        result: str,
        warnings: tuple[str, ...] = (),
        reasons: tuple[Reason, ...] = (),
    ) -> None:
        self.audit.append((actor, action, reason, result))

    # HostCommands: nothing to reboot here.
    def describe(self, cold: bool) -> str | None:
        return None

    def run(self, cold: bool) -> str:
        raise RuntimeError("no host to reboot in a supervisor test")

    def unavailable(self, cold: bool) -> str | None:
        return None

    def wrong_boot(self) -> str | None:
        return None

    # DocumentStore
    def load(self) -> dict[str, Any] | None:
        return self.document

    def save(self, document: dict[str, Any]) -> None:
        self.document = document

    # CudaProber (never called: no cards)
    def probe(self, cards: object) -> tuple[CardProbe, ...]:
        return ()


def standalone_recovery(
    recovery: RecoverySettings,
    ports: MemoryPorts | None = None,
    *,
    autostart: bool = True,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[RecoveryController, ReportsToRecovery]:
    """A controller over memory ports, and the reports a supervisor hands it."""
    ports = ports or MemoryPorts()
    controller = RecoveryController(
        recovery,
        autostart=autostart,
        rig=ports,
        latch=ports,
        audit=ports,
        prober=ports,
        host=ports,
        history=FaultHistory(ports),
        catch_up=lambda _timeout_s: True,
        clock=clock,
    )
    controller.new_boot("boot-1")
    reports = ReportsToRecovery()
    reports.attach(controller)
    return controller, reports


def attach(controller: RecoveryController, supervisor: Supervisor) -> None:
    """The supervisor becomes the engine the controller drives."""
    controller.attach_engine(SupervisedEngine(supervisor))
