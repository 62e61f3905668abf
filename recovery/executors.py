"""Executors: carry the policy's decisions out, each step recorded in the audit trail.

The only writers of the reboot-required latch and the only place ``[recovery] dry_run``
is honoured: a decision that would repair (stop and latch, restart after a backoff, the
breaker's hold) is then recorded as "not carried out" and touches nothing. Starts are
no repair: a person's start, autostart and the bring-up's start still happen in dry run,
and so does every stop asked for (a person's, a switch's, the host's reboot, fleetd's
exit). They hold ``moves``, recovery's token, while they drive the engine: fleetd's
supervisor refuses a move asked for without it (``recovery.moves``). The ports they drive (``recovery.ports``) cannot reload ``nvidia_uvm``, reset a GPU or
kill a worker: such moves are not expressible here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from hwcheck.advice import ADVICE_STEPS, RigNow
from hwcheck.model import Advice, LatchWaiver
from recovery.actions import Action, RefusalCode
from recovery.decisions import (
    AdviseInspection,
    Decision,
    Hold,
    NoAction,
    Reason,
    Refuse,
    RestartAfter,
    Start,
    Stop,
    StopAndHold,
    StopAndLatch,
)
from recovery.facts import Trigger
from recovery.history import FaultHistory
from recovery.moves import EngineMoves
from recovery.ports import (
    AuditTrail,
    DrainPort,
    EnginePort,
    HostCommands,
    LatchPort,
    Launched,
    StopKind,
)
from serving.errors import Refused, Unavailable
from serving.runtime.start_kind import StartFor

LOG = logging.getLogger("fleetd.recovery")
ACTOR = "recovery"
# A decision on these triggers answers the supervisor, which waits for what follows.
_ANSWERS_ENGINE = frozenset({Trigger.ENGINE_EXIT, Trigger.BACKOFF_DUE})
_START_KINDS = {
    Trigger.START_REQUEST: StartFor.PERSON,
    Trigger.AUTOSTART: StartFor.AUTOMATIC,
    Trigger.BRING_UP: StartFor.AUTOMATIC,
    Trigger.BACKOFF_DUE: StartFor.RESTART,
}
_STOP_KINDS = {
    Trigger.STOP_REQUEST: StopKind.PERSON,
    Trigger.SWITCH: StopKind.FLEETD,
    Trigger.HOST_REBOOT: StopKind.FLEETD,
    Trigger.SHUTDOWN: StopKind.FLEETD,
}
MANUAL_POWER_CYCLE = (
    "no [recovery] power_cycle_command is configured, so fleetd cannot power-cycle the rig: "
    "stop the engine (fleetctl stop), power the rig off at the switch or PSU for about "
    "30 s, then on (or set power_cycle_command, e.g. an IPMI or smart-plug call)"
)


@dataclass(frozen=True, slots=True)
class Context:
    """Why a decision is carried out: its trigger, who asked, and whether it is a restart.

    ``latched``: the latch was set already when the decision was made (``latch_now``), so
    the stop that follows on the worker must not set it again: a person may have cleared
    it in between (the engine was already stopped, nothing else to wait for), and a second
    set would undo their clear and count the card's fault twice.
    """

    trigger: Trigger
    actor: str = ACTOR
    restart: bool = False
    latched: bool = False


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an executor did: ``done`` False when it refused or could not act.

    ``launched`` is a start's result; ``refusals`` why a start did not happen (the gate's
    reasons, a failed probe's latch, or the engine's mechanics).
    """

    done: bool
    message: str
    launched: Launched | None = None
    refusals: tuple[Reason, ...] = ()


class Executors:
    """Carries decisions out; one instance per daemon, handed its ports."""

    def __init__(
        self,
        latch: LatchPort,
        audit: AuditTrail,
        host: HostCommands,
        history: FaultHistory,
        dry_run: bool = False,
    ) -> None:
        self._engine: EnginePort | None = None
        self._latch = latch
        self._audit = audit
        self._host = host
        self._history = history
        self.dry_run = dry_run
        self.moves = EngineMoves()
        self._drain: DrainPort | None = None

    def attach_engine(self, engine: EnginePort) -> None:
        """The engine they drive (a rig without one has nothing to start or stop)."""
        self._engine = engine

    def attach_drain(self, drain: DrainPort) -> None:
        """The rig's drain, which a confirmed reboot begins before it stops the engine."""
        self._drain = drain

    # -- decisions ----------------------------------------------------------------------
    def latch_now(self, decision: StopAndLatch) -> bool:
        """Set the latch at once and note the card's fault in its history.

        The latch blocks every start and shows in the status at once; False in dry run
        (nothing is written) or when the latch could not be written: the stop that
        follows must not depend on the store (a full disk must not blind recovery).
        """
        if self.dry_run:
            return False
        try:
            self._latch.set_latch(decision.reason, decision.advice, decision.card)
        except Exception:
            LOG.exception("the reboot latch could not be written; the engine is stopped anyway")
            return False
        if decision.card is not None:
            self._history.record(decision.card, decision.what or decision.reason, _now())
        return True

    def carry_out(self, decision: Decision, context: Context) -> Outcome:
        """Act on one decision (or, in dry run, only record a repair)."""
        with self.moves.held():
            return self._carry_out(decision, context)

    def _carry_out(self, decision: Decision, context: Context) -> Outcome:
        action, reason = describe(decision)
        answers = context.trigger in _ANSWERS_ENGINE
        if isinstance(decision, NoAction):
            if answers:
                self._stay_stopped(decision.reason)
            return Outcome(True, reason)
        canary_restart = isinstance(decision, Start) and context.trigger is Trigger.CANARY_FAIL
        repair = isinstance(decision, StopAndLatch | RestartAfter | Hold | StopAndHold)
        if self.dry_run and (repair or canary_restart):
            self._audit.record(ACTOR, action, reason, "dry run: decided, not carried out")
            if answers:
                self._stay_stopped(f"dry run: decided {action} ({reason}); not carried out")
            return Outcome(False, f"dry run: {action} not carried out ({reason})")
        match decision:
            case StopAndLatch():
                return self._stop_and_latch(decision, action, context.latched)
            case StopAndHold():
                return self._stop_and_hold(decision, action)
            case Start() if canary_restart:
                return self._restart_for_canaries(decision, action)
            case Start():
                return self._start(decision, context)
            case Stop():
                return self._stop(decision, context)
            case RestartAfter():
                if self._engine is not None:
                    self._engine.restart_after(decision.delay_s, decision.reason)
            case Hold():
                if self._engine is not None:
                    self._engine.hold(decision.reason)
            case Refuse():
                self._audit.record(
                    context.actor, action, reason, "not started", reasons=decision.reasons
                )
                if answers:
                    self._stay_stopped(_refused_words(context.trigger) + decision.line)
                return Outcome(False, decision.line, refusals=decision.reasons)
            case AdviseInspection():
                pass
        self._audit.record(ACTOR, action, reason, "done")
        return Outcome(True, reason)

    def _stop_and_latch(self, decision: StopAndLatch, action: Action, latched: bool) -> Outcome:
        # The latch first: it blocks every restart at once and shows in the status, while a
        # graceful stop may take minutes (unless the decision's caller set it already).
        if not latched:
            self.latch_now(decision)
        stopped = self._stop_engine(decision.reason, StopKind.FLEETD)
        result = (
            "latch set, engine stopped"
            if stopped
            else "latch set; the engine would not stop (a person must stop it)"
        )
        self._audit.record(ACTOR, action, decision.reason, result)
        return Outcome(stopped, f"{result}: {decision.advice_text(engine_running=not stopped)}")

    def _stop_and_hold(self, decision: StopAndHold, action: Action) -> Outcome:
        engine = self._engine
        stopped = engine is not None and engine.stop_and_hold(decision.reason)
        result = "engine stopped and held" if stopped else "the engine would not stop"
        self._audit.record(ACTOR, action, decision.reason, result)
        return Outcome(stopped, f"{result}: {decision.reason}")

    def _restart_for_canaries(self, decision: Start, action: Action) -> Outcome:
        engine = self._engine
        if engine is None:
            return Outcome(False, "no engine is configured on this rig")
        try:
            engine.restart_automatic(decision.reason)
        except Refused as exc:
            self._audit.record(ACTOR, action, decision.reason, f"refused: {exc.message}")
            return Outcome(False, exc.message, refusals=(Reason(exc.code, exc.message),))
        warned = tuple(w.line for w in decision.warnings)
        result = "restarting" if not warned else "restarting, with warnings: " + "; ".join(warned)
        self._audit.record(ACTOR, action, decision.reason, result, warnings=warned)
        return Outcome(True, decision.reason)

    def _start(self, decision: Start, context: Context) -> Outcome:
        action, reason = describe(decision)
        engine = self._engine
        if engine is None:
            return Outcome(False, "no engine is configured on this rig")
        try:
            if context.restart:
                engine.restart(decision.reason)
                launched = Launched(None)
            else:
                launched = engine.start(decision.reason, _START_KINDS[context.trigger])
        except Refused as exc:
            refusals = tuple(
                r if isinstance(r, Reason) else Reason(r.code, r.line) for r in exc.reasons
            ) or (Reason(exc.code, exc.message),)
            self._audit.record(
                context.actor, action, reason, f"refused: {exc.message}", reasons=refusals
            )
            return Outcome(False, exc.message, refusals=refusals)
        reasons = (*decision.warnings, *launched.warnings)
        warned = tuple(w.line for w in reasons)
        result = "done" if not warned else "done, with warnings: " + "; ".join(warned)
        self._audit.record(context.actor, action, reason, result, warnings=warned, reasons=reasons)
        return Outcome(True, reason, launched=launched)

    def _stop(self, decision: Stop, context: Context) -> Outcome:
        action, reason = describe(decision)
        if self._engine is None:
            return Outcome(False, "no engine is configured on this rig")
        kind = _STOP_KINDS.get(context.trigger, StopKind.FLEETD)
        try:
            stopped = self._engine.stop(decision.reason, kind)
        except Unavailable as exc:
            self._audit.record(context.actor, action, reason, f"not stopped: {exc.message}")
            raise
        if kind is StopKind.PERSON:
            result = "accepted (the engine stops in the background)"
        else:
            result = "engine stopped" if stopped else "the engine would not stop"
        self._audit.record(context.actor, action, reason, result)
        return Outcome(stopped, result if stopped else f"{reason}: {result}")

    def _stop_engine(self, reason: str, kind: StopKind) -> bool:
        """Stop the engine for fleetd's own reason; False when it would not (or cannot)."""
        engine = self._engine
        if engine is None:
            return True
        try:
            return engine.stop(reason, kind)
        except Unavailable:
            return False

    def _stay_stopped(self, why: str) -> None:
        engine = self._engine
        if engine is not None:
            engine.stay_stopped(why)

    # -- a person's requests -----------------------------------------------------------
    def can_power_cycle(self) -> bool:
        """True when a cold power cycle has a command to run (the simulated one counts)."""
        return self._host.describe(True) is not None

    def wrong_boot(self) -> str | None:
        """The default boot entry a confirmed reboot would refuse without ``force``."""
        return self._host.wrong_boot()

    def advised_flags(self) -> str | None:
        """The ``fleetctl reboot`` flags the latch in force asks for (None: no latch)."""
        latch = self._latch.latch()
        if latch is None:
            return None
        return "--confirm" if latch.advice is Advice.WARM_REBOOT else "--confirm --cold"

    def _against_the_advice(self, cold: bool) -> str | None:
        """Why a warm reboot goes against the latch's rung (None: it does not)."""
        latch = self._latch.latch()
        if cold or latch is None or latch.advice is Advice.WARM_REBOOT:
            return None
        words = ADVICE_STEPS[latch.advice].text(
            RigNow(False, latched=True, latch_advice=latch.advice, latch_card=latch.card)
        )
        return (
            f"the latch asks for more than a warm reboot ({words}); a warm reboot has not "
            "helped this card"
        )

    def explain_reboot(self, cold: bool) -> str:
        """What ``reboot --confirm [--cold]`` would do, without doing it."""
        command = self._host.describe(cold)
        if command is None:
            return MANUAL_POWER_CYCLE
        what = "power-cycles the rig with" if cold else "runs"
        flags = "--confirm --cold" if cold else "--confirm"
        drains = ""
        if self._drain is not None:
            drains = (
                "drains the rig (the guard answers 503 draining, so load balancers move the "
                f"traffic; running requests get up to {self._drain.default_grace_s:g} s), then "
            )
        text = (
            f"fleetctl reboot {flags} {drains}stops the engine cleanly (its graceful signals, "
            f"never SIGKILL unless [serving] allow_kill), then {what} {command}; if the engine "
            "will not stop it does not reboot"
        )
        against = self._against_the_advice(cold)
        if against is not None:
            text += (
                f". BUT {against}: {flags} is refused (fleetctl reboot --confirm --cold "
                f"power-cycles; {flags} --force reboots warm anyway)"
            )
        missing = self._host.unavailable(cold)
        if missing is not None:
            text += f". BUT {missing}: {flags} is refused until it is fixed"
        wrong = self._host.wrong_boot()
        if wrong is not None:
            text += (
                f". BUT {wrong}: {flags} is refused until the default entry is fixed "
                f"({flags} --force boots it anyway)"
            )
        return text

    def _cannot_reboot(self, cold: bool, force: bool) -> Reason | None:
        """What refuses a confirmed reboot before anything stops (None: it may go on)."""
        missing = self._host.unavailable(cold)
        if missing is not None:
            return Reason(
                RefusalCode.REBOOT_COMMAND, f"{missing}: not rebooting; nothing was stopped"
            )
        against = None if force else self._against_the_advice(cold)
        if against is not None:
            return Reason(
                RefusalCode.COLD_ADVISED,
                f"{against}: not rebooting warm; nothing was stopped",
                "power-cycle instead: fleetctl reboot --confirm --cold, or reboot warm "
                "anyway: fleetctl reboot --confirm --force",
            )
        wrong = None if force else self._host.wrong_boot()
        if wrong is not None:
            flags = "--confirm --cold" if cold else "--confirm"
            return Reason(
                RefusalCode.BOOT_ENTRY,
                f"{wrong}: not rebooting into it; nothing was stopped",
                "make the baseline kernel the default boot entry again (fleetctl status: "
                f"host_kernel says how), or boot this entry anyway: fleetctl reboot {flags} "
                "--force",
            )
        return None

    def reboot(self, actor: str, cold: bool = False, force: bool = False) -> Outcome:
        """A person confirmed: stop cleanly, then reboot (or power-cycle) if the stop took.

        Refused before anything stops when the command's program is not on this host, and
        (unless ``force``) when the default boot entry is not the baseline kernel or when it
        is a warm reboot while the latch asks for more (a cold power cycle, the card out).
        """
        action = Action.POWER_CYCLE if cold else Action.REBOOT
        why = "confirmed by a person" + (" (--force)" if force else "")
        if self._host.describe(cold) is None:
            self._audit.record(actor, action, why, "not configured: explained the manual way")
            return Outcome(False, MANUAL_POWER_CYCLE)
        refusal = self._cannot_reboot(cold, force)
        if refusal is not None:
            self._audit.record(actor, action, why, f"refused: {refusal.message}")
            return Outcome(False, refusal.line, refusals=(refusal,))
        if self.dry_run:
            self._audit.record(actor, action, why, "dry run: not carried out")
            return Outcome(False, f"dry run: the {action.replace('_', ' ')} was not carried out")
        if self._drain is not None:  # load balancers move traffic away before the stop
            prepared = self._drain.before_reboot(actor)
            self._audit.record(
                actor, Action.DRAIN, f"{action.replace('_', ' ')} {why}", prepared.words
            )
            if prepared.still_running:
                names = ", ".join(prepared.still_running)
                message = (
                    f"engine {names} would not stop: not rebooting (stop it, or power-cycle "
                    "by hand); this engine keeps serving"
                )
                self._audit.record(actor, action, why, message)
                return Outcome(False, message)
        with self.moves.held():
            stopped = self._stop_engine(f"{action.replace('_', ' ')} {why}", StopKind.FLEETD)
        if not stopped:
            message = "the engine would not stop: not rebooting (stop it, or power-cycle by hand)"
            self._audit.record(actor, action, why, message)
            return Outcome(False, message)
        self._history.note_reboot(cold)
        try:
            ran = self._host.run(cold)
        except Exception as exc:  # the command's failure is the person's answer, in one line
            message = f"the engine is stopped, but the {action.replace('_', ' ')} failed: {exc}"
            self._audit.record(actor, action, why, message)
            return Outcome(False, message)
        self._audit.record(actor, action, why, f"ran {ran}")
        return Outcome(True, f"engine stopped; ran {ran}")

    def clear_latch(self, reason: str, actor: str, waiver: LatchWaiver) -> Outcome:
        """The recorded operator override of the latch, and what it waives for starts."""
        if not reason.strip():
            return Outcome(False, "a reason is required to clear the reboot latch")
        cleared = self._latch.clear_latch(reason, actor, waiver)
        result = "latch cleared" if cleared else "the latch was not set"
        result += "; faults seen before now no longer refuse a start (a new one latches again)"
        self._audit.record(actor, Action.CLEAR_LATCH, reason, result)
        return Outcome(cleared, result)


def _refused_words(trigger: Trigger) -> str:
    return "automatic restart refused: " if trigger is Trigger.BACKOFF_DUE else "not restarted: "


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def describe(decision: Decision) -> tuple[Action, str]:
    """The audit trail's action name and reason for ``decision``."""
    match decision:
        case StopAndLatch():
            return Action.STOP_AND_LATCH, decision.reason
        case RestartAfter():
            return Action.RESTART_AFTER, decision.reason
        case Start():
            return Action.START, decision.reason
        case Stop():
            return Action.STOP, decision.reason
        case Hold():
            return Action.HOLD, decision.reason
        case StopAndHold():
            return Action.STOP_AND_HOLD, decision.reason
        case Refuse():
            # The short reasons: what to do is each reason's own (the refusal's ``reasons``).
            return Action.REFUSE, decision.headline
        case AdviseInspection():
            return Action.ADVISE_INSPECTION, decision.reason
        case NoAction():
            return Action.NONE, decision.reason
