"""What the recovery policy is told: plain frozen facts, gathered by the controller.

The policy never reads the hardware, the store or the clock itself: the controller
collects these facts through its ports (new Xids with the catalogue's answer, NVML card
faults, CUDA probe results, the engine's state and last exit, the checks, the latch, the
cards the recipe uses, the restart history, each card's faults of earlier boots) and
hands them in with ``now``, so every decision can be replayed in a test in microseconds.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from hwcheck.cuda_results import CardProbe, ProbeOutcome
from hwcheck.model import Advice, CheckResult, LostKind, XidInfo
from recovery.decisions import Reason
from recovery.settings import PolicySettings
from serving.runtime.classify import CrashClass

__all__ = [
    "CardFault",
    "CardProbe",
    "EngineCondition",
    "EngineExit",
    "Facts",
    "LatchFact",
    "PastFault",
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
    AUTOSTART = "autostart"  # fleetd started with autostart on
    BRING_UP = "bring_up"  # the end of the bring-up after a reboot (autostart's rules)
    BACKOFF_DUE = "backoff_due"  # the wait before an automatic restart is over
    STOP_REQUEST = "stop_request"  # a person asked for a stop
    SWITCH = "switch"  # ``serve NAME`` stops the engine to start another profile
    HOST_REBOOT = "host_reboot"  # the (simulated) host reboots: every process ends
    SHUTDOWN = "shutdown"  # fleetd exits with ``[serving] stop_on_exit``
    CANARY_FAIL = "canary_fail"  # a canary round failed and [canary] on_fail asks to act


STARTS = frozenset(
    {Trigger.START_REQUEST, Trigger.AUTOSTART, Trigger.BRING_UP, Trigger.BACKOFF_DUE}
)
STOPS = frozenset({Trigger.STOP_REQUEST, Trigger.SWITCH, Trigger.HOST_REBOOT, Trigger.SHUTDOWN})


class EngineCondition(enum.StrEnum):
    """Whether an engine process exists, which is all the policy needs of its state."""

    RUNNING = "running"  # starting, ready or unhealthy: a process serves or will
    STOPPED = "stopped"  # no engine process (stopped, backoff, held, failed)


@dataclass(frozen=True, slots=True)
class XidFact:
    """One new Xid with the catalogue's answer on it (``info.latches``, ``info.advice``)."""

    info: XidInfo
    card: int | None = None
    pci_bus_id: str | None = None

    @property
    def xid(self) -> int:
        """The Xid number."""
        return self.info.xid


@dataclass(frozen=True, slots=True)
class CardFault:
    """What NVML says is wrong with one card.

    ``lost_kind`` is how NVML said the card is gone (``None``: it still answers);
    ``recovery_action`` is NVML field 230 (``NVML_FI_DEV_GET_GPU_RECOVERY_ACTION``):
    0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset, 6 bus reset,
    7 system reboot; ``None`` when the driver does not report it.
    """

    card: int
    lost_kind: LostKind | None = None
    recovery_action: int | None = None


@dataclass(frozen=True, slots=True)
class EngineExit:
    """How the engine ended: the crash class from its log (``None``: not classified).

    The class stays the classifier's enum from the supervisor's report to the policy:
    nothing matches it as a string.

    ``description`` is the supervisor's account in words, used in the decision's reason;
    ``ready_for_s`` is how long that run had been ready (``None``: it never was), which
    forgives the backoff streak once it reaches ``backoff_reset_after_s``.
    """

    crash_class: CrashClass | None = None
    exit_code: int | None = None
    signal: int | None = None
    description: str | None = None
    ready_for_s: float | None = None


@dataclass(frozen=True, slots=True)
class LatchFact:
    """The reboot-required latch in force: why, and the step it asks for."""

    reason: str
    advice: Advice = Advice.WARM_REBOOT
    card: int | None = None  # the card the fault is on (None: the rig)


@dataclass(frozen=True, slots=True)
class PastFault:
    """A hardware fault a card had in an earlier boot (the escalation's evidence).

    ``boots_ago`` counts the reboots since (1: the boot just before this one);
    ``rebooted_at`` is when the first of them was seen; ``power_cycled`` is true when one of
    them was a confirmed cold power cycle (then a warm reboot was not what failed);
    ``warm_reboots`` and ``cold_cycles`` count them (a reboot fleetd did not run counts as
    warm): the attempts the next rung names.
    """

    card: int
    boots_ago: int
    what: str
    at: str
    rebooted_at: str = ""
    power_cycled: bool = False
    warm_reboots: int = 0
    cold_cycles: int = 0


# The recipe's facts: the cards it uses (``None``: every card) and its lint errors.
RecipeFacts = tuple[frozenset[int] | None, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class Facts:
    """Everything one decision may depend on.

    ``checks`` are the rig's check results now; ``recipe_cards`` the cards the recipe
    uses (``None``: every card), the only ones whose results gate its start;
    ``recipe_errors`` the recipe's lint errors. ``restart_times_s`` are the monotonic
    times of past automatic restarts; ``failures_in_a_row`` counts engine failures since
    the engine was last ready long enough; ``operator_hold`` is a person's stop (or a
    breaker hold) that automatic starts must respect; ``host_rebooting`` is true while a
    confirmed (or simulated) reboot ends every process; ``cards_held_by`` names a
    diagnostic that has the cards to itself (the memory test), during which nothing starts.
    The recipe's cards and errors are gathered only when the decision reads them (a start,
    an exit's restart: ``policy.reads_recipe``), never for an Xid, a card fault, a probe
    or a stop: those decide without touching the model's disk. ``stop_reason`` is what a
    stop was asked for, in words (the status shows it afterwards).
    ``held_elsewhere`` is what of this host would block the recipe's launch (its port or
    cards held by another process, named): a switch gathers it before it stops the
    running engine, so a start that cannot happen never costs the engine that serves.
    ``recipe_blocks`` is what of the recipe's own files would fail its launch (a checkpoint
    shard missing or short, at quick depth): read with the recipe's facts, refused before
    any card is probed, as a launch that would die 20 to 45 minutes in never begins.
    ``canary_action`` and ``canary_reason`` are what a failing canary round asks for and why.
    ``others_cards`` are the cards the rig's other engines use (several engines: ``[serving]
    run``): a card's non-gating result there is that engine's warning, not this one's.
    """

    trigger: Trigger
    engine: EngineCondition = EngineCondition.STOPPED
    new_xids: tuple[XidFact, ...] = ()
    card_faults: tuple[CardFault, ...] = ()
    probes: tuple[CardProbe, ...] = ()
    engine_exit: EngineExit | None = None
    checks: tuple[CheckResult, ...] = ()
    latch: LatchFact | None = None
    recipe_cards: frozenset[int] | None = None
    recipe_errors: tuple[str, ...] = ()
    past_faults: tuple[PastFault, ...] = ()
    restart_times_s: tuple[float, ...] = ()
    failures_in_a_row: int = 0
    operator_hold: bool = False
    host_rebooting: bool = False
    cards_held_by: str | None = None
    stop_reason: str = ""
    held_elsewhere: tuple[Reason, ...] = ()
    recipe_blocks: tuple[Reason, ...] = ()
    canary_action: str | None = None  # on_fail's "restart" or "hold" (CANARY_FAIL only)
    canary_reason: str = ""
    others_cards: frozenset[int] = frozenset()
    settings: PolicySettings = field(default_factory=PolicySettings)
