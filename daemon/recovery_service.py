"""Recovery wired into fleetd: facts gathered here, decisions made by ``recovery.policy``.

Every path ends in ``decide``: a new Xid (the follower's listener), a card NVML calls
lost or asking for a reset (the poller's snapshot listener), an engine run that ended on
its own (the supervisor's advisor), a start (the preflight's gate, autostart) and a CUDA
probe. Decisions are carried out by ``recovery.executors`` and recorded in the audit
trail (with a ``recovery`` event); with ``[recovery] dry_run`` they are only recorded.

Threads: listeners run on the follower's and the poller's threads and must not block, so
a stop-and-latch sets the latch at once (it blocks restarts and shows in the status) and
hands the engine's graceful stop, which may take minutes, to this service's worker.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from daemon.canary_check import CHECK_ID as ENGINE_OUTPUT_CHECK
from daemon.monitor import RigMonitor
from daemon.recovery_parts import RECOVERY_ACTIONS, EngineDriver, StoreAudit, StoreLatch
from daemon.store import Store
from hwcheck.cuda_results import CardProbe, CudaProber, ProbeOutcome
from hwcheck.model import ClassifiedXid, GpuSnapshot, RigSnapshot, Severity
from recovery.decisions import Decision, NoAction, Refuse, Start, StopAndLatch
from recovery.executors import Executors, RebootRunner, describe
from recovery.facts import (
    CardFault,
    CriticalCheck,
    EngineCondition,
    Facts,
    PolicySettings,
    Trigger,
    XidFact,
)
from recovery.policy import decide, start_gate
from recovery.supervision import exit_facts, policy_settings, verdict_for
from serving.errors import InvalidInput, Refused
from serving.runtime.exit_advice import ExitReport, ExitVerdict, LeaveStopped
from serving.runtime.states import ServingState
from serving.settings import RecoverySettings

log = logging.getLogger("fleetd.recovery")

# Reading the kernel log up to the present before an exit decision waits at most this.
CATCH_UP_S = 1.5
# A start this soon after a passed probe (the bring-up's) does not probe again.
PROBE_FRESH_S = 30.0
LAST_DECISIONS = 10
# Checks that never block an engine start (``critical_checks``).
NOT_GATING_CHECKS = frozenset({ENGINE_OUTPUT_CHECK})
_RUNNING_STATES = frozenset(
    {ServingState.STARTING, ServingState.READY, ServingState.UNHEALTHY, ServingState.STOPPING}
)


class RecoverableEngine(Protocol):
    """What recovery needs of the engine service (``daemon.engine_service``)."""

    def stop_for_recovery(self, reason: str) -> ServingState:
        """Graceful stop, no restart; the state it ended in."""
        ...

    def start_for_recovery(self, reason: str) -> None:
        """Start (raises ``StartRefused`` with the reasons)."""
        ...

    def state(self) -> tuple[ServingState, int | None]:
        """State and pid now."""
        ...

    def held_by_a_person(self) -> bool:
        """A person's stop or a breaker hold."""
        ...


def card_fault_of(card: GpuSnapshot) -> CardFault | None:
    """What NVML says is wrong with one card of a snapshot, or None when nothing is."""
    lost = bool(card.lost)
    reason = (card.lost_reason or "").lower()
    reset_required = lost and "reset" in reason
    action = card.recovery_action
    if not lost and not action:
        return None
    return CardFault(
        card=card.index,
        lost=lost and not reset_required,
        reset_required=reset_required,
        recovery_action=action,
    )


class RecoveryService:
    """Facts in, the policy's decisions out, carried out (or, in dry run, recorded)."""

    def __init__(
        self,
        recovery: RecoverySettings,
        *,
        autostart: bool,
        store: Store,
        monitor: RigMonitor,
        prober: CudaProber,
        reboot_runner: RebootRunner,
        catch_up: Callable[[float], bool],
    ) -> None:
        self.settings: PolicySettings = policy_settings(recovery, autostart=autostart)
        self.dry_run = recovery.dry_run
        self._store = store
        self._monitor = monitor
        self._prober = prober
        self._catch_up = catch_up
        self._latch = StoreLatch(store)
        self._audit = StoreAudit(store, self.dry_run)
        self._driver = EngineDriver(stop=None, start_engine=None)
        self._engine_state: Callable[[], tuple[ServingState, int | None]] = lambda: (
            ServingState.STOPPED,
            None,
        )
        self._operator_hold: Callable[[], bool] = lambda: False
        self.executors = Executors(
            self._driver, self._latch, self._audit, reboot_runner, self.dry_run
        )
        self._faulty_cards: dict[int, CardFault] = {}
        self._probe_passed_at_s = float("-inf")
        self.rebooting = threading.Event()
        self.last_bring_up: dict[str, Any] | None = None
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._worker = threading.Thread(target=self._work, name="recovery", daemon=True)
        self._worker.start()

    # -- wiring -----------------------------------------------------------------------
    def attach_engine(self, engine: RecoverableEngine) -> None:
        """The engine service: its clean stop and start, its state, a person's hold."""
        self._driver.stop = engine.stop_for_recovery
        self._driver.start_engine = engine.start_for_recovery
        self._engine_state = engine.state
        self._operator_hold = engine.held_by_a_person

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the recovery worker (carry-outs that may block)."""
        self._jobs.put(job)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except Exception:
                log.exception("a recovery job failed")

    def close(self) -> None:
        """Stop the worker after the jobs queued so far."""
        self._jobs.put(None)
        self._worker.join(5.0)

    # -- facts ------------------------------------------------------------------------
    def engine_condition(self) -> EngineCondition:
        """Whether an engine process exists (or is about to)."""
        state, pid = self._engine_state()
        running = pid is not None or state in _RUNNING_STATES
        return EngineCondition.RUNNING if running else EngineCondition.STOPPED

    def critical_checks(self) -> tuple[CriticalCheck, ...]:
        """The checks critical now (they block starts), but the engine's own output check.

        A failed canary judges the engine, not the cards: restarting it is how a person
        tests a fix, so it must not be refused.
        """
        return tuple(
            CriticalCheck(result.id, result.message, result.card)
            for result in self._monitor.view().results
            if result.severity is Severity.CRITICAL and result.id not in NOT_GATING_CHECKS
        )

    def facts(self, trigger: Trigger, **more: Any) -> Facts:
        """The facts every decision shares, plus ``more``."""
        base = Facts(
            trigger=trigger,
            engine=self.engine_condition(),
            critical_checks=self.critical_checks(),
            latch_reason=self._latch.reason(),
            host_rebooting=self.rebooting.is_set(),
            settings=self.settings,
        )
        return replace(base, **more)

    # -- decisions --------------------------------------------------------------------
    def act(self, decision: Decision) -> None:
        """Carry ``decision`` out; a stop-and-latch latches now and stops on the worker."""
        if isinstance(decision, NoAction):
            return
        if isinstance(decision, StopAndLatch) and not self.dry_run:
            self._latch.set_latch(decision.reason, decision.advice_text)
        self.submit(lambda: self._carry_out(decision))

    def _carry_out(self, decision: Decision) -> None:
        outcome = self.executors.carry_out(decision)
        if not outcome.done:
            log.warning("recovery: %s", outcome.message)

    def on_xid(self, item: ClassifiedXid, card: int | None) -> None:
        """The Xid path's listener: every new Xid goes to the policy."""
        fact = XidFact(
            xid=item.event.xid,
            xid_class=item.info.xid_class,
            action=item.info.action,
            explanation=item.info.explanation,
            card=card,
            pci_bus_id=item.event.pci_bus_id,
        )
        decision = decide(self.facts(Trigger.XID, new_xids=(fact,)), 0.0)
        self.act(decision)
        if not isinstance(decision, StopAndLatch) and not self.dry_run:
            # A suspicious event while no engine runs: is the card still usable?
            why = f"after Xid {fact.xid} with the engine stopped"
            self.submit(lambda: self._probe_if_stopped(why))

    def _probe_if_stopped(self, why: str) -> None:
        if self.engine_condition() is EngineCondition.STOPPED:
            self.probe(why)

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
            self.act(decide(self.facts(Trigger.CARD_FAULT, card_faults=tuple(faults)), 0.0))

    def new_boot(self) -> None:
        """A new boot: card faults are judged afresh."""
        self._faulty_cards = {}

    def advise_exit(self, report: ExitReport) -> ExitVerdict:
        """The supervisor's question after a run ended on its own (its loop thread).

        The kernel log is read up to the present first: an Xid 31 often kills the engine a
        moment before its line is read, and the restart must not race the latch.
        """
        if not self._catch_up(CATCH_UP_S):
            log.warning("the kernel log could not be read up to now before the exit decision")
        facts = exit_facts(report, self.settings)
        facts = replace(
            facts,
            critical_checks=self.critical_checks(),
            latch_reason=self._latch.reason(),
            host_rebooting=self.rebooting.is_set(),
        )
        decision = decide(facts, report.now_s)
        action, reason = describe(decision)
        if self.dry_run and not isinstance(decision, NoAction):
            self._audit.record("recovery", action, reason, "dry run: decided, not carried out")
            return LeaveStopped(f"dry run: decided {action} ({reason}); not carried out")
        if isinstance(decision, StopAndLatch):
            self._latch.set_latch(decision.reason, decision.advice_text)
            self._audit.record("recovery", action, reason, "latch set; the engine had ended")
        elif not isinstance(decision, NoAction):
            self._audit.record("recovery", action, reason, "done")
        return verdict_for(decision)

    # -- starts -----------------------------------------------------------------------
    def gate(self, probe: bool = True) -> list[tuple[str, str]]:
        """``(code, message)`` of every reason the engine may not start now.

        With ``probe``, runs the CUDA probe when no engine runs (never beside one): a
        failed probe latches the reboot and blocks the start.
        """
        reasons = [(r.code, r.message) for r in start_gate(self.facts(Trigger.START_REQUEST))]
        if reasons or not probe or self.engine_condition() is EngineCondition.RUNNING:
            return reasons
        if time.monotonic() - self._probe_passed_at_s < PROBE_FRESH_S:
            self._probe_passed_at_s = float("-inf")  # one start per passed probe
            return reasons
        failed = self.probe("before an engine start")
        if failed is not None:
            reasons.append(("cuda_probe", failed))
        return reasons

    def probe(self, why: str) -> str | None:
        """Run the CUDA probe on every card (engine stopped); the failure, or None."""
        latest = self._monitor.view().latest
        cards = [card.index for card in latest.cards if not card.lost] if latest else []
        if not cards:
            return None
        results = self._prober.probe(cards)
        self._audit.record("recovery", "probe", why, probe_summary(results))
        decision = decide(self.facts(Trigger.PROBE, probes=results), 0.0)
        if isinstance(decision, StopAndLatch):
            self.act(decision)
            return decision.reason
        self._probe_passed_at_s = time.monotonic()
        return None

    def autostart(self) -> Decision:
        """Autostart's decision (fleetd start, bring-up); a start is carried out here."""
        facts = self.facts(Trigger.AUTOSTART, operator_hold=self._operator_hold())
        decision = decide(facts, 0.0)
        if isinstance(decision, Start):
            if self.dry_run:  # a start is no recovery move: dry run keeps only those back
                self._audit.record("recovery", "start", decision.reason, "done (not a repair)")
                self._driver.start(decision.reason)
            else:
                self._carry_out(decision)
        elif isinstance(decision, Refuse):
            self._audit.record("recovery", *describe(decision), "engine not started")
        return decision

    def start_error(self) -> str | None:
        """Why the last start the policy decided did not happen, or None."""
        return self._driver.last_start_error

    def record(self, action: str, reason: str, result: str) -> None:
        """One audit row and event by fleetd itself (the bring-up)."""
        self._audit.record("fleetd", action, reason, result)

    # -- a person's requests ----------------------------------------------------------
    def reboot(self, confirm: bool, actor: str) -> dict[str, Any]:
        """``reboot``: explain without ``confirm``; else clean stop, then the reboot."""
        if not confirm:
            return {"confirmed": False, "done": False, "message": self.executors.explain_reboot()}
        outcome = self.executors.reboot(actor)
        if not outcome.done:
            raise Refused(outcome.message, "reboot_refused")
        return {"confirmed": True, "done": True, "message": outcome.message}

    def clear(self, reason: str, actor: str) -> dict[str, Any]:
        """The recorded operator override of the latch."""
        if not reason.strip():
            raise InvalidInput("a reason is required to clear the reboot latch")
        outcome = self.executors.clear_latch(reason, actor)
        return {"cleared": outcome.done, "message": outcome.message}

    # -- status -----------------------------------------------------------------------
    def last_decisions(self) -> list[dict[str, Any]]:
        """The newest recovery decisions and actions from the audit trail."""
        rows = [r for r in self._store.list_audit(limit=100) if r.action in RECOVERY_ACTIONS]
        return [
            {
                "ts": row.ts.isoformat(),
                "actor": row.actor,
                "action": row.action,
                "reason": row.reason,
                "outcome": row.outcome,
                "dry_run": row.dry_run,
            }
            for row in rows[:LAST_DECISIONS]
        ]


def probe_summary(results: Sequence[CardProbe]) -> str:
    """One line: each card's probe outcome (with the CUDA error name when it failed)."""
    if results and all(r.outcome is ProbeOutcome.UNAVAILABLE for r in results):
        return f"unavailable: {results[0].error or 'no CUDA driver library'}"
    parts = []
    for result in results:
        text = f"card {result.card} {result.outcome}"
        if result.outcome is not ProbeOutcome.OK and result.error:
            text += f" ({result.error})"
        parts.append(text)
    return ", ".join(parts)
