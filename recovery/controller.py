"""Recovery's controller: every trigger goes facts -> ``decide`` -> executors, here.

A new Xid (the follower's listener), a card NVML calls lost or asking for a reset (the
poller's snapshot listener), a CUDA probe, an engine run that ended on its own and the
end of a backoff (the supervisor's reports), every start (``starts.StartPath``: a
person's start or restart, autostart, the bring-up) and every stop (``request_stop``: a
person's, a profile switch's, the host's reboot, fleetd's exit) ask ``decide`` once and
hand the decision to the executors, which record it in the audit trail; no engine moves
any other way (``recovery.moves``). The controller reads fleetd's state only through its
ports (``recovery.ports``), which ``daemon/`` implements, and only it writes its own
state (the host's reboot under way, the last bring-up, the streak, the faulty cards).

Threads: listeners run on the follower's, the poller's and the supervisor's threads and
must not block, so a stop-and-latch sets the latch at once (it blocks restarts and shows
in the status) and the rest, which may take minutes (a graceful stop), runs on this
controller's worker, one job at a time. Starts run on their caller's thread (the API's,
or the worker's), one at a time.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from hwcheck.cuda_results import CudaProber
from hwcheck.model import ClassifiedXid, GpuSnapshot, LatchWaiver, LostKind, RigSnapshot, xid_key
from hwcheck.threads import CrashReport, ServiceThread, Wake
from recovery.actions import Action, RefusalCode
from recovery.decisions import Decision, NoAction, Reason, StopAndHold, StopAndLatch
from recovery.executors import Context, Executors, describe
from recovery.facts import (
    STOPS,
    CardFault,
    EngineCondition,
    EngineExit,
    Facts,
    RecipeFacts,
    Trigger,
    XidFact,
)
from recovery.gate import start_gate
from recovery.history import FaultHistory
from recovery.moves import EngineMoves
from recovery.policy import decide, reads_recipe
from recovery.ports import (
    AuditTrail,
    EnginePort,
    HostCommands,
    LatchPort,
    RigView,
    StopNotice,
    StopWitness,
)
from recovery.refusals import LastRefusal, RefusalMemory
from recovery.settings import RecoverySettings, policy_settings
from recovery.starts import StartAnswer, StartPath
from recovery.stops import StopAnswer
from recovery.streak import RestartStreak
from serving.errors import Conflict, InvalidInput, Refused

LOG = logging.getLogger("fleetd.recovery")

# Reading the kernel log up to the present before an exit decision waits at most this.
CATCH_UP_S = 1.5


def card_fault_of(card: GpuSnapshot) -> CardFault | None:
    """What NVML says is wrong with one card of a snapshot, or None when nothing is."""
    if card.lost:
        return CardFault(card.index, card.lost_kind or LostKind.UNKNOWN, card.recovery_action)
    if card.recovery_action:
        return CardFault(card.index, None, card.recovery_action)
    return None


class RecoveryController:
    """Facts in, the policy's decisions out, carried out (or, in dry run, recorded)."""

    def __init__(
        self,
        recovery: RecoverySettings,
        *,
        autostart: bool,
        rig: RigView,
        latch: LatchPort,
        audit: AuditTrail,
        prober: CudaProber,
        host: HostCommands,
        history: FaultHistory,
        catch_up: Callable[[float], bool],
        clock: Callable[[], float] = time.monotonic,
        on_crash: CrashReport | None = None,
    ) -> None:
        """``on_crash``: told if the worker's loop itself dies (a job's error is only logged)."""
        self.settings = policy_settings(recovery, autostart=autostart)
        self.dry_run = recovery.dry_run
        self._rig = rig
        self._latch = latch
        self._audit = audit
        self._catch_up = catch_up
        self._clock = clock
        # One per rig, shared by every engine's controller: a fault, a boot and the way the
        # host rebooted are the host's (separate copies saved over one another's).
        self.history = history
        self.executors = Executors(latch, audit, host, self.history, self.dry_run)
        self.streak = RestartStreak()
        self._engine: EnginePort | None = None
        self._others_cards: Callable[[], frozenset[int]] = frozenset
        self._witness: StopWitness | None = None
        self._faulty_cards: dict[int, CardFault] = {}
        self._rebooting = threading.Event()
        self._reboot_lock = threading.Lock()
        self._reboot_by = ""
        self._last_bring_up: dict[str, Any] | None = None
        self.starts = StartPath(self, rig, prober, clock, recovery.probe_min_interval_s)
        self.refusals = RefusalMemory()
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._worker = ServiceThread("recovery", self._work, on_crash=on_crash, log=LOG)
        self._worker.start()

    # -- wiring -----------------------------------------------------------------------
    def attach_engine(self, engine: EnginePort) -> None:
        """The engine it drives (its mechanics: start, stop, the backoff, the hold)."""
        self._engine = engine
        self.executors.attach_engine(engine)

    def attach_others_cards(self, others_cards: Callable[[], frozenset[int]]) -> None:
        """The cards the rig's other engines use (several engines): their warnings, not ours."""
        self._others_cards = others_cards

    def attach_witness(self, witness: StopWitness) -> None:
        """The crash black box, told of every latch, recovery's stops and every exit."""
        self._witness = witness

    def _tell_witness(self, notice: StopNotice) -> None:
        witness = self._witness
        if witness is None:
            return
        try:
            witness.witness(notice)
        except Exception:  # evidence must never stand in recovery's way
            LOG.exception("the crash black box failed to take a note")

    @property
    def engine(self) -> EnginePort | None:
        """The engine, when the rig has one."""
        return self._engine

    @property
    def engine_moves(self) -> EngineMoves:
        """The token the executors hold while they move the engine.

        fleetd's supervisor checks it before every move asked of it (``recovery.moves``).
        """
        return self.executors.moves

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the worker (carry-outs that may block)."""
        self._jobs.put(job)

    def _work(self, _wake: Wake) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except Exception:
                LOG.exception("a recovery job failed")

    def close(self) -> None:
        """Stop the worker after the jobs queued so far."""
        self._jobs.put(None)
        self._worker.join(5.0)

    # -- facts ------------------------------------------------------------------------
    def engine_condition(self) -> EngineCondition:
        """Whether an engine process exists (or is about to)."""
        engine = self._engine
        return EngineCondition.STOPPED if engine is None else engine.condition()

    def facts(self, trigger: Trigger, recipe: RecipeFacts | None = None, **more: Any) -> Facts:
        """The facts a decision on ``trigger`` reads (through the ports), plus ``more``.

        The recipe's facts (its cards, its lint errors: the model directory's config, a
        listing, a stat per weight file) are gathered only when the decision reads them
        (``policy.reads_recipe``: a start, an exit's restart), unless ``recipe`` gives
        them; and first: the facts held in memory (the latch above all) are read after
        them, so a latch set while the model's disk was slow is not missed.
        """
        facts = self._memory_facts(trigger, **more)
        if recipe is None:
            if not reads_recipe(facts):
                return facts
            recipe = self.recipe_facts()
            more = {"recipe_blocks": self.recipe_blocks(), **more}
            facts = self._memory_facts(trigger, **more)  # read again, after the disk
        cards, errors = recipe
        return replace(facts, recipe_cards=cards, recipe_errors=errors)

    def recipe_facts(self) -> RecipeFacts:
        """The recipe's cards and lint errors now (may read the model's disk)."""
        engine = self._engine
        if engine is None:
            return None, ()
        return engine.recipe_cards(), engine.recipe_errors()

    def recipe_blocks(self) -> tuple[Reason, ...]:
        """What of the recipe's files would fail its launch now (reads the model's disk)."""
        engine = self._engine
        return () if engine is None else engine.recipe_blocks()

    def _memory_facts(self, trigger: Trigger, **more: Any) -> Facts:
        engine = self._engine
        now_s = self._clock()
        base = Facts(
            trigger=trigger,
            engine=self.engine_condition(),
            checks=self._rig.results(),
            latch=self._latch.latch(),
            past_faults=self.history.past_faults(),
            restart_times_s=self.streak.recent(now_s, self.settings.breaker_window_s),
            failures_in_a_row=self.streak.failures_in_a_row,
            operator_hold=False if engine is None else engine.held_by_a_person(),
            host_rebooting=self._rebooting.is_set(),
            cards_held_by=self.starts.cards_held_by,
            others_cards=self._others_cards(),
            settings=self.settings,
        )
        return replace(base, **more)

    # -- carrying out -----------------------------------------------------------------
    def act(
        self,
        decision: Decision,
        trigger: Trigger,
        xids: tuple[tuple[int, int | None], ...] = (),
    ) -> None:
        """Carry ``decision`` out: a latch at once, the rest (a stop) on the worker.

        The black box is told last (a note only: it reads on its own thread), so neither
        the latch nor the stop waits on evidence.
        """
        if isinstance(decision, NoAction):
            return
        latched = isinstance(decision, StopAndLatch) and self.executors.latch_now(decision)
        self.submit(lambda: self._carry_out(decision, Context(trigger, latched=latched)))
        if isinstance(decision, StopAndLatch | StopAndHold):
            action, reason = describe(decision)
            card = decision.card if isinstance(decision, StopAndLatch) else None
            self._tell_witness(StopNotice(str(trigger), action, reason, card, xids))

    def _carry_out(self, decision: Decision, context: Context) -> None:
        outcome = self.executors.carry_out(decision, context)
        if not outcome.done:
            LOG.warning("recovery: %s", outcome.message)

    # -- triggers ---------------------------------------------------------------------
    def on_xid(self, item: ClassifiedXid, card: int | None) -> None:
        """The Xid path's listener: every new Xid goes to the policy."""
        fact = XidFact(item.info, card, item.event.pci_bus_id)
        decision = decide(self.facts(Trigger.XID, new_xids=(fact,)), self._clock())
        self.act(decision, Trigger.XID, ((fact.xid, card),))
        if not isinstance(decision, StopAndLatch) and not self.dry_run:
            # A suspicious event while no engine runs: is the card still usable? One such
            # probe waits at a time; the Xids behind it fold into it (``probe_limit``).
            why = f"after Xid {fact.xid} with the engine stopped"
            if self.starts.limiter.claim():
                self.submit(lambda: self._probe_if_stopped(why))

    def _probe_if_stopped(self, why: str) -> None:
        self.starts.limiter.release()
        if self.engine_condition() is not EngineCondition.STOPPED:
            return
        engine = self._engine
        if engine is not None and engine.held_by_a_person():
            return  # no start is pending: the answer would serve nobody
        cards = self.starts.limiter.due(self.starts.live_cards())
        if cards:
            self.probe(why, cards)

    def on_snapshot(self, snapshot: RigSnapshot) -> None:
        """The poller's listener: a card newly lost, asking for a reset or a reboot."""
        faults: list[CardFault] = []
        seen: dict[int, CardFault] = {}
        for card in snapshot.cards:
            fault = card_fault_of(card)
            if fault is None:
                continue
            seen[card.index] = fault
            if self._faulty_cards.get(card.index) != fault:
                faults.append(fault)
        self._faulty_cards = seen
        if faults:
            facts = self.facts(Trigger.CARD_FAULT, card_faults=tuple(faults))
            self.act(decide(facts, self._clock()), Trigger.CARD_FAULT)

    def on_engine_exit(self, exit_: EngineExit) -> None:
        """The supervisor's report of a run that ended on its own: decided on the worker."""
        self.submit(lambda: self._after_exit(exit_))

    def _after_exit(self, exit_: EngineExit) -> None:
        # The kernel log is read up to the present first: an Xid 31 often kills the engine
        # a moment before its line is read, and the restart must not race the latch.
        if not self._catch_up(CATCH_UP_S):
            LOG.warning("the kernel log could not be read up to now before the exit decision")
        decision = decide(self.facts(Trigger.ENGINE_EXIT, engine_exit=exit_), self._clock())
        self.streak.note(decision)
        self._carry_out(decision, Context(Trigger.ENGINE_EXIT))
        action, reason = describe(decision)
        self._tell_witness(
            StopNotice(
                str(Trigger.ENGINE_EXIT),
                action,
                reason,
                card=decision.card if isinstance(decision, StopAndLatch) else None,
                crash_class=None if exit_.crash_class is None else str(exit_.crash_class),
                exit_code=exit_.exit_code,
                description=exit_.description,
                ready_for_s=exit_.ready_for_s,
            )
        )

    def on_backoff_due(self) -> None:
        """The supervisor's report that a backoff is over: the start path, on the worker."""
        self.submit(self._backoff_due)

    def _backoff_due(self) -> None:
        answer = self.request_start(Trigger.BACKOFF_DUE)
        if not answer.started:
            LOG.warning("automatic restart not made: %s", answer.why_not)

    def request_start(
        self, trigger: Trigger, actor: str = "recovery", restart: bool = False
    ) -> StartAnswer:
        """Every start: one ``decide``, carried out, the answer back to the caller.

        A refusal is kept (``last_refusal``) until a start goes ahead.
        """
        answer = self.starts.request(trigger, actor, restart)
        self.refusals.note(trigger, answer.started, answer.refusals, answer.why_not, actor)
        return answer

    def last_refusal(self) -> LastRefusal | None:
        """The last start refused since the last start (the engine line says why)."""
        return self.refusals.last

    @property
    def last_refused_start(self) -> LastRefusal | None:
        """The last start refused (every reason, with its code), until one is made."""
        return self.refusals.last

    def request_stop(self, trigger: Trigger, actor: str, reason: str = "") -> StopAnswer:
        """Every stop asked for: one ``decide``, carried out on this thread, the answer.

        ``trigger`` says whose (``facts.STOPS``: a person's, a profile switch's, the
        host's reboot, fleetd's exit); ``reason`` is shown in the status afterwards (the
        policy's words when empty). It never waits for a start under way (``recovery.stops``).
        """
        if trigger not in STOPS:
            raise ValueError(f"{trigger} is not a stop")
        if self._engine is None:
            return StopAnswer(NoAction("no engine is configured on this rig"))
        decision = decide(self.facts(trigger, stop_reason=reason), self._clock())
        return StopAnswer(decision, self.executors.carry_out(decision, Context(trigger, actor)))

    def on_canary_failure(self, action: str, reason: str) -> str:
        """A failing canary round asks for ``action`` (restart, hold): one line of what was done.

        Decided and carried out on the caller's thread (the canary runner's), under the
        start path's lock.
        """
        answer = self.starts.canary_action(action, reason)
        decision = answer.decision
        if isinstance(decision, NoAction):
            return f"nothing done: {decision.reason}"
        done = answer.outcome is not None and answer.outcome.done
        message = answer.outcome.message if answer.outcome is not None else ""
        return f"{describe(decision)[0]} {'done' if done else 'not done'}: {message}"

    def reconcile(self, waived: frozenset[str]) -> Decision | None:
        """At start: decide now what recovery owes for this boot's stored faults.

        fleetd may have been killed between reading a hardware Xid (or seeing a lost card)
        and carrying out its decision; the stored Xid is then no longer new, so nothing
        else would act on it. Every hardware-class Xid of this boot that a person has not
        waived (``waived``: their keys) and every card NVML reports lost is decided again
        unless the latch is set and no engine runs (then nothing is owed). Returns the
        decision acted on, or None.
        """
        cards = {card.pci_bus_id: card.index for card in self._rig.cards()}
        xids = tuple(
            XidFact(item.info, cards.get(item.event.pci_bus_id or ""), item.event.pci_bus_id)
            for item in self._rig.xids()
            if item.info.advice is not None and xid_key(item.event) not in waived
        )
        faults = tuple(f for card in self._rig.cards() if (f := card_fault_of(card)) is not None)
        if not xids and not faults:
            return None
        if self._latch.latch() is not None and self.engine_condition() is EngineCondition.STOPPED:
            return None
        trigger = Trigger.XID if xids else Trigger.CARD_FAULT
        facts = self.facts(trigger, new_xids=xids, card_faults=faults)
        decision = decide(facts, self._clock())
        LOG.warning("recovery reconciles this boot's stored faults at start: %s", decision)
        self.act(decision, trigger)
        return decision

    def start_refusals(
        self,
        recipe_cards: frozenset[int] | None = None,
        recipe_errors: tuple[str, ...] | None = None,
        held_elsewhere: tuple[Reason, ...] = (),
    ) -> tuple[Reason, ...]:
        """What the start gate would refuse now, before anything moves (nothing is done).

        A switch (``fleetctl serve NAME``) asks it for NAME's recipe (its cards, lint
        errors, and its port or cards another process holds) before it stops the running
        engine, and ``start --stop-foreign`` before it stops anyone's container; the start
        itself is still ``request_start``'s decision. Without a recipe's cards and errors,
        the engine's (the profile in force).
        """
        recipe = None if recipe_errors is None else (recipe_cards, recipe_errors)
        facts = self.facts(Trigger.START_REQUEST, recipe, held_elsewhere=held_elsewhere)
        return start_gate(facts)[0]

    def new_boot(self, boot_id: str) -> None:
        """A new boot (or fleetd's start in one): card faults are judged afresh."""
        self._faulty_cards = {}
        self.starts.limiter.new_boot()
        self.history.new_boot(boot_id, datetime.now(UTC).isoformat(timespec="seconds"))

    def probe(self, why: str, cards: Sequence[int] | None = None) -> str | None:
        """Run the CUDA probe (engine stopped) and decide on it; the failure, or None."""
        return self.starts.probe(why, cards)

    # -- the host's reboot and the bring-up after it -----------------------------------
    @property
    def host_rebooting(self) -> bool:
        """True while the host reboots: an engine that ends then is no crash to restart."""
        return self._rebooting.is_set()

    def begin_host_reboot(self) -> None:
        """The (simulated) host is going down: every process ends, none is restarted."""
        self._rebooting.set()

    def end_host_reboot(self) -> None:
        """The reboot is over (its bring-up ran), or it failed before the host went down."""
        self._rebooting.clear()

    @property
    def last_bring_up(self) -> dict[str, Any] | None:
        """What the last bring-up did (the status's ``recovery.bring_up``), or None."""
        return self._last_bring_up

    def record_bring_up(self, boot_id: str, summary: str, answer: StartAnswer) -> dict[str, Any]:
        """The bring-up's end: kept for the status and recorded (audit row and event)."""
        document: dict[str, Any] = {
            "ts": datetime.now(UTC).isoformat(),
            "boot_id": boot_id,
            "engine_started": answer.started,
            "summary": summary,
            "refusals": [
                {"code": reason.code, "message": reason.line, "blocking": True}
                for reason in answer.refusals
            ],
        }
        self._last_bring_up = document
        self._audit.record("fleetd", Action.BRING_UP, "the host rebooted", summary)
        return document

    def record_probe(self, why: str, summary: str) -> None:
        """A probe round in the audit trail (recovery's own)."""
        self._audit.record("recovery", Action.PROBE, why, summary)

    # -- a person's requests ----------------------------------------------------------
    def reboot(
        self, confirm: bool, actor: str, cold: bool = False, force: bool = False
    ) -> dict[str, Any]:
        """``reboot``: explain without ``confirm``; else clean stop, then the command.

        ``force``: boot a default entry that is not the baseline kernel anyway, or reboot
        warm while the latch asks for a cold power cycle.
        """
        if not confirm:
            message = self.executors.explain_reboot(cold)
            return {
                "confirmed": False,
                "done": False,
                "cold": cold,
                "message": message,
                "advised": self.executors.advised_flags(),
            }
        # One at a time: concurrent confirmed reboots collapse into the first (issue 22).
        if not self._reboot_lock.acquire(blocking=False):
            raise Conflict(f"a reboot is already in progress ({self._reboot_by})", "reboot_busy")
        try:
            what = "power cycle" if cold else "reboot"
            self._reboot_by = f"{what} asked by {actor} at {datetime.now(UTC):%H:%M:%S} UTC"
            outcome = self.executors.reboot(actor, cold, force)
        finally:
            self._reboot_lock.release()
        if not outcome.done:
            code = outcome.refusals[0].code if outcome.refusals else RefusalCode.REBOOT_REFUSED
            raise Refused(outcome.message, code)
        return {"confirmed": True, "done": True, "cold": cold, "message": outcome.message}

    def wrong_boot(self) -> str | None:
        """The default boot entry a confirmed reboot would refuse (None: fine)."""
        return self.executors.wrong_boot()

    def power_cycle_available(self) -> bool:
        """True when ``reboot --confirm --cold`` can power-cycle here (not only explain)."""
        return self.executors.can_power_cycle()

    def clear(self, reason: str, actor: str) -> dict[str, Any]:
        """The recorded operator override: the latch goes, earlier faults stop gating."""
        if not reason.strip():
            raise InvalidInput("a reason is required to clear the reboot latch")
        keys = frozenset(xid_key(item.event) for item in self._rig.xids())
        waiver = LatchWaiver(reason.strip(), datetime.now(UTC), keys)
        outcome = self.executors.clear_latch(reason, actor, waiver)
        self._rig.rejudge()  # the waived checks are no longer critical, now
        return {"cleared": outcome.done, "message": outcome.message}
