"""Executors: carry the policy's decisions out, each step recorded in the audit trail.

The recovery package does no I/O of its own: the daemon hands in the few things an
executor may touch (the engine's stop, the latch, the power caps, the reboot command, the
audit trail) as the small protocols below. None of them can reload ``nvidia_uvm``, reset a
GPU or kill a worker: such moves are not expressible here. ``dry_run`` records each
decision as "not carried out" and touches nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from recovery.decisions import (
    AdviseInspection,
    Decision,
    Hold,
    NoAction,
    Refuse,
    RestartAfter,
    Start,
    StopAndLatch,
)


class EngineControl(Protocol):
    """The engine as recovery may drive it: a clean stop and a start, nothing else."""

    def stop_cleanly(self, reason: str) -> bool:
        """Graceful signals (SIGKILL only with ``[serving] allow_kill``); True when it stopped."""
        ...

    def start(self, reason: str) -> None:
        """Start the engine (the supervisor's mechanics: launch, probe)."""
        ...

    def hold(self, reason: str) -> None:
        """Keep the engine down until a person acts (the breaker)."""
        ...

    def restart_after(self, delay_s: float, reason: str) -> None:
        """Schedule an automatic restart after ``delay_s``."""
        ...


class LatchControl(Protocol):
    """The durable reboot-required latch."""

    def set_latch(self, reason: str, advice: str) -> None:
        """Set the latch (a second fault keeps the first reason)."""
        ...

    def clear_latch(self, reason: str, by: str) -> bool:
        """Clear it as an operator override; False when it was not set."""
        ...


class AuditTrail(Protocol):
    """Who did what, why, and how it ended."""

    def record(self, actor: str, action: str, reason: str, result: str) -> None:
        """Append one audit row (and its event)."""
        ...


class RebootRunner(Protocol):
    """Runs the configured reboot command (or, under --simulate, the simulated reboot)."""

    def describe(self) -> str:
        """What a confirmed reboot would run, for the explanation without ``--confirm``."""
        ...

    def reboot(self) -> str:
        """Reboot now; returns what was run (the command, or the simulated reboot)."""
        ...


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an executor did: ``done`` False when it refused or could not act."""

    done: bool
    message: str


ACTOR = "recovery"


class Executors:
    """Carries decisions out; one instance per daemon, handed its protocols."""

    def __init__(
        self,
        engine: EngineControl,
        latch: LatchControl,
        audit: AuditTrail,
        reboot_runner: RebootRunner,
        dry_run: bool = False,
    ) -> None:
        self._engine = engine
        self._latch = latch
        self._audit = audit
        self._reboot_runner = reboot_runner
        self._dry_run = dry_run

    def carry_out(self, decision: Decision) -> Outcome:
        """Act on one decision (or, in dry run, only record it)."""
        action, reason = describe(decision)
        if isinstance(decision, NoAction):
            return Outcome(True, reason)
        if self._dry_run:
            self._audit.record(ACTOR, action, reason, "dry run: decided, not carried out")
            return Outcome(False, f"dry run: {action} not carried out ({reason})")
        match decision:
            case StopAndLatch():
                # The latch first: it blocks every restart at once and shows in the status,
                # while a graceful stop may take minutes.
                self._latch.set_latch(decision.reason, decision.advice_text)
                stopped = self._engine.stop_cleanly(decision.reason)
                result = (
                    "latch set, engine stopped"
                    if stopped
                    else "latch set; the engine would not stop (a person must stop it)"
                )
                self._audit.record(ACTOR, action, reason, result)
                return Outcome(stopped, f"{result}: {decision.advice_text}")
            case RestartAfter():
                self._engine.restart_after(decision.delay_s, decision.reason)
            case Start():
                self._engine.start(decision.reason)
            case Hold():
                self._engine.hold(decision.reason)
            case Refuse() | AdviseInspection():
                pass
        self._audit.record(ACTOR, action, reason, "done")
        return Outcome(True, reason)

    def explain_reboot(self) -> str:
        """What ``reboot --confirm`` would do, without doing it."""
        return (
            "fleetctl reboot --confirm stops the engine cleanly (its graceful signals, never "
            f"SIGKILL unless [serving] allow_kill), then runs {self._reboot_runner.describe()}; if the engine will not stop "
            "it does not reboot"
        )

    def reboot(self, actor: str) -> Outcome:
        """A person confirmed: stop cleanly, then reboot only if the stop took."""
        if self._dry_run:
            self._audit.record(actor, "reboot", "confirmed by a person", "dry run: not carried out")
            return Outcome(False, "dry run: the reboot was not carried out")
        if not self._engine.stop_cleanly("reboot confirmed by a person"):
            message = "the engine would not stop: not rebooting (stop it, or power-cycle by hand)"
            self._audit.record(actor, "reboot", "confirmed by a person", message)
            return Outcome(False, message)
        try:
            ran = self._reboot_runner.reboot()
        except Exception as exc:  # the command's failure is the person's answer, in one line
            message = f"the engine is stopped, but the reboot failed: {exc}"
            self._audit.record(actor, "reboot", "confirmed by a person", message)
            return Outcome(False, message)
        self._audit.record(actor, "reboot", "confirmed by a person", f"ran {ran}")
        return Outcome(True, f"engine stopped; ran {ran}")

    def clear_latch(self, reason: str, actor: str) -> Outcome:
        """The recorded operator override of the latch."""
        if not reason.strip():
            return Outcome(False, "a reason is required to clear the reboot latch")
        cleared = self._latch.clear_latch(reason, actor)
        result = "latch cleared" if cleared else "the latch was not set"
        self._audit.record(actor, "clear_latch", reason, result)
        return Outcome(cleared, result)


def describe(decision: Decision) -> tuple[str, str]:
    """The audit trail's action name and reason for ``decision``."""
    match decision:
        case StopAndLatch():
            return "stop_and_latch", decision.reason
        case RestartAfter():
            return "restart_after", decision.reason
        case Start():
            return "start", decision.reason
        case Hold():
            return "hold", decision.reason
        case Refuse():
            return "refuse", "; ".join(r.message for r in decision.reasons)
        case AdviseInspection():
            return "advise_inspection", decision.reason
        case NoAction():
            return "none", decision.reason


def refusal_messages(decision: Decision) -> Sequence[str]:
    """One line per reason when ``decision`` refuses a start; empty otherwise."""
    if isinstance(decision, Refuse):
        return [f"{r.code}: {r.message}" for r in decision.reasons]
    return []
