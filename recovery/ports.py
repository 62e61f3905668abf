"""The controller's ports: what recovery needs of the rest of fleetd, as small protocols.

Recovery does no I/O of its own: ``daemon/`` implements these over its monitor, store,
engine service and host commands and hands them in. The engine port is the only way an
engine moves (start, stop, restart, the backoff, the breaker's hold), and none of the
ports can reload ``nvidia_uvm``, reset a GPU or kill a worker: such moves are not
expressible here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Protocol

from hwcheck.cuda_results import ProbeRound
from hwcheck.model import Advice, CheckResult, ClassifiedXid, GpuSnapshot, LatchWaiver
from recovery.actions import Action
from recovery.decisions import Reason
from recovery.facts import EngineCondition, LatchFact
from serving.runtime.start_kind import StartFor


class StopKind(enum.StrEnum):
    """Who a stop is for: a person (answered at once), or fleetd's own (waited for)."""

    PERSON = "person"  # automatic starts then leave the engine down, across fleetd restarts
    FLEETD = "fleetd"  # a fault's latch, a profile switch, the host's reboot, fleetd's exit


@dataclass(frozen=True, slots=True)
class Launched:
    """What a start did: the engine's pid, or that one already ran.

    ``warnings`` are the mechanics' (a foreign process on cards the recipe does not use):
    they go with the start like the gate's.
    """

    pid: int | None
    already_running: bool = False
    warnings: tuple[Reason, ...] = ()


class EnginePort(Protocol):
    """The engine as recovery drives it (the supervisor's mechanics behind it).

    ``start`` raises ``serving.errors.Refused`` when the mechanics refuse (the port is
    taken, processes of the last engine survive, the launcher fails); ``start``, ``restart``
    and ``stop`` raise ``serving.errors.Unavailable`` once fleetd is shutting down.
    Only recovery's executors call these moves (``recovery.moves``). ``restart_after``,
    ``hold`` and ``stay_stopped`` answer an exit or a backoff's end: the supervisor
    ignores them when a person moved the engine in the meantime.
    """

    def condition(self) -> EngineCondition:
        """Whether an engine process exists (or is about to)."""
        ...

    def held_by_a_person(self) -> bool:
        """A person's stop or a breaker hold: automatic starts leave the engine down."""
        ...

    def recipe_cards(self) -> frozenset[int] | None:
        """The cards the recipe uses (``None``: every card)."""
        ...

    def recipe_errors(self) -> tuple[str, ...]:
        """The recipe's lint errors, one line each."""
        ...

    def recipe_blocks(self) -> tuple[Reason, ...]:
        """What of the recipe's files would fail its launch (a short checkpoint shard)."""
        ...

    def start(self, reason: str, kind: StartFor) -> Launched:
        """Launch now (a no-op when it runs)."""
        ...

    def restart(self, reason: str) -> None:
        """A person's restart: stop cleanly, then launch (finishes in the background)."""
        ...

    def stop(self, reason: str, kind: StopKind) -> bool:
        """Graceful signals (SIGKILL only with ``[serving] allow_kill``), ``reason`` shown.

        True when stopped; a person's stop (``StopKind.PERSON``) is answered at once, True
        once accepted, and finishes in the background.
        """
        ...

    def restart_after(self, delay_s: float, reason: str) -> None:
        """Wait ``delay_s`` (``backoff``), then report that the backoff is due."""
        ...

    def hold(self, reason: str) -> None:
        """The breaker: ``held`` until a person starts it."""
        ...

    def stay_stopped(self, reason: str) -> None:
        """No restart after an exit or a backoff: ``stopped``, with the reason shown."""
        ...

    def restart_automatic(self, reason: str) -> None:
        """Recovery's restart of a running engine (counted in the running restart total)."""
        ...

    def stop_and_hold(self, reason: str) -> bool:
        """Stop cleanly and keep it down until a person starts it; True when it stopped."""
        ...


class RigView(Protocol):
    """The rig as fleetd sees it now (the monitor's memory), and its refresh."""

    def results(self) -> tuple[CheckResult, ...]:
        """The check results of the last poll."""
        ...

    def cards(self) -> tuple[GpuSnapshot, ...]:
        """The cards of the last poll (empty before the first)."""
        ...

    def xids(self) -> tuple[ClassifiedXid, ...]:
        """This boot's Xids so far."""
        ...

    def note_probes(self, probes: ProbeRound) -> None:
        """Keep the last probe round (the ``cuda_probe`` check judges it)."""
        ...

    def rejudge(self) -> None:
        """Run the checks again now (after a clear or a probe), not at the next poll."""
        ...


class LatchPort(Protocol):
    """The durable reboot-required latch and a person's waiver (written by executors only)."""

    def latch(self) -> LatchFact | None:
        """The latch in force, or None."""
        ...

    def set_latch(self, reason: str, advice: Advice, card: int | None = None) -> None:
        """Set it (a second fault keeps the first reason and time)."""
        ...

    def clear_latch(self, reason: str, by: str, waiver: LatchWaiver) -> bool:
        """The operator override, with what it waives; False when it was not set."""
        ...


@dataclass(frozen=True, slots=True)
class BeforeReboot:
    """What a confirmed reboot's preparation did: its words, and what it could not stop.

    ``still_running``: the other engines of the rig (``[serving] run``) that would not
    stop; a reboot then refuses like it does when its own engine will not stop (recovery
    rule 2: never a reboot over an engine that did not stop cleanly).
    """

    words: str
    still_running: tuple[str, ...] = ()


class DrainPort(Protocol):
    """The rig's drain (``daemon.engine.drain``): a confirmed reboot drains before it stops."""

    @property
    def default_grace_s(self) -> float:
        """The grace a reboot's drain gives running requests (``[recovery] drain_grace_s``)."""
        ...

    def before_reboot(self, actor: str) -> BeforeReboot:
        """Begin the drain, wait until no request runs or its grace is over; what it did.

        On a rig of several engines it then stops the others, naming those that would not.
        """
        ...


class AuditTrail(Protocol):
    """Who did what, why, and how it ended."""

    def record(
        self,
        actor: str,
        action: Action,
        reason: str,
        result: str,
        warnings: tuple[str, ...] = (),
        reasons: tuple[Reason, ...] = (),
    ) -> None:
        """Append one audit row (and its event; a warning event when ``warnings``).

        ``reasons``: a refusal's reasons or a start's warnings, with their codes (the alert
        rules tell from them what already alerts on its own).
        """
        ...


class HostCommands(Protocol):
    """The host's reboot and power cycle (under ``--simulate``: the simulated reboot)."""

    def describe(self, cold: bool) -> str | None:
        """What a confirmed reboot (``cold``: power cycle) would run; None: not configured."""
        ...

    def unavailable(self, cold: bool) -> str | None:
        """Why it cannot run on this host (its program is missing); None: it can."""
        ...

    def wrong_boot(self) -> str | None:
        """The default boot entry when the next boot would not be the baseline kernel."""
        ...

    def run(self, cold: bool) -> str:
        """Run it now; returns what ran (raises with one line when it fails)."""
        ...


class DocumentStore(Protocol):
    """One JSON document kept across fleetd restarts and reboots (the fault history)."""

    def load(self) -> dict[str, Any] | None:
        """The document, or None when there is none."""
        ...

    def save(self, document: dict[str, Any]) -> None:
        """Replace it."""
        ...


@dataclass(frozen=True, slots=True)
class StopNotice:
    """An event the black box keeps evidence of: a latch, a stop recovery made, an exit.

    ``trigger`` and ``action`` are the trigger's and the decision's names; ``xids`` the
    new Xids that decided it as ``(xid, card)``; ``crash_class`` the classifier's class of
    an exit (its enum value), ``description`` the supervisor's account of it; ``engine``
    the side engine whose controller saw it, on a rig of several engines.
    """

    trigger: str
    action: str
    reason: str
    card: int | None = None
    xids: tuple[tuple[int, int | None], ...] = ()
    crash_class: str | None = None
    exit_code: int | None = None
    description: str | None = None
    ready_for_s: float | None = None
    engine: str | None = None  # the side engine it concerns (None: the primary)


class StopWitness(Protocol):
    """fleetd's crash black box, told of each event after the latch and the stop signal.

    ``witness`` must not block (it runs on the follower's, the poller's and the recovery
    worker's threads): it takes a note and reads the rest on its own thread, so evidence
    never delays or blocks recovery.
    """

    def witness(self, notice: StopNotice) -> None:
        """Keep evidence of ``notice`` (returns at once; never raises)."""
        ...
