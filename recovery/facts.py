"""What the recovery policy is told: plain frozen facts, gathered by the daemon.

The policy never reads the hardware, the store or the clock itself: the daemon collects
these facts (new Xids with the catalogue's verdict, NVML card faults, CUDA probe results,
the engine's state and last exit, critical checks, the latch, the restart history) and
hands them in with ``now``, so every decision can be replayed in a test in microseconds.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from hwcheck.cuda_results import CardProbe, ProbeOutcome
from hwcheck.model import XidAction, XidClass

__all__ = [
    "CardFault",
    "CardProbe",
    "CriticalCheck",
    "EngineCondition",
    "EngineExit",
    "Facts",
    "PolicySettings",
    "ProbeOutcome",
    "Trigger",
    "XidFact",
]


class Trigger(enum.StrEnum):
    """Why the policy is being asked now."""

    XID = "xid"  # new Xid records were read from the kernel log
    CARD_FAULT = "card_fault"  # NVML reports a card lost / reset required / a recovery action
    PROBE = "probe"  # a CUDA probe finished
    ENGINE_EXIT = "engine_exit"  # the engine ended without being asked to
    START_REQUEST = "start_request"  # a person asked for a start or restart
    AUTOSTART = "autostart"  # fleetd started (or a reboot was detected) with autostart on
    BACKOFF_DUE = "backoff_due"  # the wait before an automatic restart is over


class EngineCondition(enum.StrEnum):
    """Whether an engine process exists, which is all the policy needs of its state."""

    RUNNING = "running"  # starting, ready or unhealthy: a process serves or will
    STOPPED = "stopped"  # no engine process (stopped, backoff, held, failed)


@dataclass(frozen=True, slots=True)
class XidFact:
    """One new Xid with the catalogue's verdict (overrides applied)."""

    xid: int
    xid_class: XidClass
    action: XidAction
    explanation: str
    card: int | None = None
    pci_bus_id: str | None = None


@dataclass(frozen=True, slots=True)
class CardFault:
    """What NVML says is wrong with one card.

    ``recovery_action`` is NVML field 230 (``NVML_FI_DEV_GET_GPU_RECOVERY_ACTION``):
    0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset, 6 bus reset,
    7 system reboot; ``None`` when the driver does not report it.
    """

    card: int
    lost: bool = False
    reset_required: bool = False
    recovery_action: int | None = None


@dataclass(frozen=True, slots=True)
class EngineExit:
    """How the engine ended: the crash class from its log (``None``: not classified).

    ``description`` is the supervisor's account in words, used in the decision's reason.
    """

    crash_class: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    description: str | None = None


@dataclass(frozen=True, slots=True)
class CriticalCheck:
    """A check that is critical now (it blocks starts)."""

    check_id: str
    message: str
    card: int | None = None


@dataclass(frozen=True, slots=True)
class PolicySettings:
    """The knobs the policy reads; the daemon builds them from ``[recovery]``/``[serving]``.

    Backoff is ``min(backoff_base_s * 2**(n-1), backoff_max_s)`` for the n-th failure in a
    row; ``breaker_max_restarts`` automatic restarts within ``breaker_window_s`` hold the
    engine until a person acts.
    """

    autostart: bool = True
    restart_on_failure: bool = True
    backoff_base_s: float = 10.0
    backoff_max_s: float = 300.0
    breaker_max_restarts: int = 5
    breaker_window_s: float = 30 * 60.0


@dataclass(frozen=True, slots=True)
class Facts:
    """Everything one decision may depend on.

    ``restart_times_s`` are the monotonic times of past automatic restarts;
    ``failures_in_a_row`` counts engine failures since the engine was last ready long
    enough; ``operator_hold`` is a person's stop (or an unacknowledged breaker hold) that
    automatic starts must respect; ``latch_reason`` is set while a reboot is required;
    ``host_rebooting`` is true while a confirmed (or simulated) reboot ends every process.
    """

    trigger: Trigger
    engine: EngineCondition = EngineCondition.STOPPED
    new_xids: tuple[XidFact, ...] = ()
    card_faults: tuple[CardFault, ...] = ()
    probes: tuple[CardProbe, ...] = ()
    engine_exit: EngineExit | None = None
    critical_checks: tuple[CriticalCheck, ...] = ()
    latch_reason: str | None = None
    restart_times_s: tuple[float, ...] = ()
    failures_in_a_row: int = 0
    operator_hold: bool = False
    host_rebooting: bool = False
    settings: PolicySettings = field(default_factory=PolicySettings)
