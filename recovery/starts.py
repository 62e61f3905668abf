"""The one start path: ``request`` -> facts (with a CUDA probe) -> ``decide`` -> executors.

A person's ``start`` and ``restart`` (and ``serve``), autostart, the bring-up after a
reboot and the end of a backoff all come here. The facts include a CUDA probe of the
recipe's cards when no engine runs and no latch is set (never beside a running engine; a
probe that passed in the last ``PROBE_FRESH_S``, the bring-up's, is not run again). The
decision goes back to the caller as a ``StartAnswer``: a refusal returns at once, with
every reason and what to do; a start with the warnings it was made with.

A diagnostic that needs the cards to itself (fleetd's memory test) takes them here
(``cards_held``), between starts and probes: while it holds them a start is refused
(``cards_busy``, through ``decide``) and no probe runs beside it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from hwcheck.cuda_results import CardProbe, CudaProber, ProbeOutcome, ProbeRound
from recovery.actions import RefusalCode
from recovery.decisions import Decision, NoAction, Reason, Refuse, Start, StopAndLatch
from recovery.executors import Context, Executors, Outcome
from recovery.facts import EngineCondition, Facts, RecipeFacts, Trigger
from recovery.gate import WAY_OUT
from recovery.policy import decide
from recovery.ports import EnginePort, RigView
from recovery.probe_limit import PROBE_MIN_INTERVAL_S, ProbeLimiter
from recovery.streak import RestartStreak
from serving.errors import Busy

# A start this soon after a passed probe (the bring-up's) does not probe again.
PROBE_FRESH_S = 30.0
# A diagnostic waits this long for a start or probe under way before it gives up.
HOLD_WAIT_S = 60.0
LOG = logging.getLogger("fleetd.recovery")
_AUTOMATIC = frozenset({Trigger.AUTOSTART, Trigger.BRING_UP})


@dataclass(frozen=True, slots=True)
class StartAnswer:
    """The decision a start request got, and what carrying it out did."""

    decision: Decision
    outcome: Outcome | None = None

    @property
    def started(self) -> bool:
        """True when the engine was started (or already ran)."""
        return isinstance(self.decision, Start) and self.outcome is not None and self.outcome.done

    @property
    def refusals(self) -> tuple[Reason, ...]:
        """Why it did not start: the gate's reasons, a failed probe, or the mechanics'."""
        match self.decision:
            case Refuse(reasons=reasons):
                return reasons
            case StopAndLatch(reason=reason, advice=advice):
                return (
                    Reason(RefusalCode.REBOOT_LATCH, f"reboot required: {reason}", WAY_OUT[advice]),
                )
        return () if self.outcome is None else self.outcome.refusals

    @property
    def warnings(self) -> tuple[Reason, ...]:
        """What is wrong but did not refuse the start (the gate's, then the mechanics')."""
        if not isinstance(self.decision, Start):
            return ()
        launched = None if self.outcome is None else self.outcome.launched
        return self.decision.warnings + (() if launched is None else launched.warnings)

    @property
    def why_not(self) -> str:
        """One line: why the engine did not start (empty when it did)."""
        if self.started:
            return ""
        if self.refusals:
            return "; ".join(reason.line for reason in self.refusals)
        if isinstance(self.decision, NoAction):
            return self.decision.reason
        return "" if self.outcome is None else self.outcome.message


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


class Controller(Protocol):
    """Recovery's controller as the start path uses it (``recovery.controller``).

    Declared here, not imported: the controller builds its start path, so the start path
    names only what it uses of it: the facts of a trigger, the executors that carry a
    decision out, the restart streak, the engine, the audit of a probe and ``act``.
    """

    @property
    def engine(self) -> EnginePort | None:
        """The engine, when the rig has one."""
        ...

    @property
    def executors(self) -> Executors:
        """What carries a decision out (and records it)."""
        ...

    @property
    def streak(self) -> RestartStreak:
        """The automatic restarts counted for the backoff and the breaker."""
        ...

    def facts(self, trigger: Trigger, recipe: RecipeFacts | None = None, **more: Any) -> Facts:
        """The facts a decision on ``trigger`` reads, plus ``more``."""
        ...

    def act(self, decision: Decision, trigger: Trigger) -> None:
        """Carry ``decision`` out: a latch at once, the rest on the controller's worker."""
        ...

    def record_probe(self, why: str, summary: str) -> None:
        """A probe round in the audit trail."""
        ...


class StartPath:
    """Starts and probes, one at a time (a probe never runs beside a start)."""

    def __init__(
        self,
        controller: Controller,
        rig: RigView,
        prober: CudaProber,
        clock: Callable[[], float],
        probe_min_interval_s: float = PROBE_MIN_INTERVAL_S,
    ) -> None:
        self._controller = controller
        self._rig = rig
        self._prober = prober
        self._clock = clock
        self._lock = threading.RLock()
        self._probe_passed_at_s = float("-inf")
        self._held_by: str | None = None
        # Automatic probes: coalesced, each card at most once per ``probe_min_interval_s``.
        self.limiter = ProbeLimiter(clock, probe_min_interval_s)

    @property
    def cards_held_by(self) -> str | None:
        """The diagnostic that has the cards to itself now, or None."""
        return self._held_by

    @contextmanager
    def cards_held(self, what: str, wait_s: float = HOLD_WAIT_S) -> Iterator[None]:
        """Give ``what`` the cards: no start and no probe until the block ends.

        Taken between starts and probes, never beside one: it waits up to ``wait_s`` for
        one under way, then raises ``Busy`` (as it does while another holds the cards).
        """
        if not self._lock.acquire(timeout=wait_s):
            raise Busy("an engine start or a CUDA probe is under way: try again", "start_busy")
        try:
            if self._held_by is not None:
                raise Busy(f"{self._held_by} has the cards", "cards_busy")
            self._held_by = what
        finally:
            self._lock.release()
        try:
            yield
        finally:
            self._held_by = None

    def request(self, trigger: Trigger, actor: str, restart: bool) -> StartAnswer:
        """One start request: the facts, one decision, carried out; the answer."""
        controller = self._controller
        with self._lock:
            if controller.engine is None:
                return StartAnswer(NoAction("no engine is configured on this rig"))
            if trigger is Trigger.START_REQUEST:
                controller.streak.clear()  # a person acted: backoff and breaker start over
            facts = controller.facts(trigger)
            if self._probe_needed(facts):
                probes = self._probe_for_start(facts)
                # Read again after the probe (seconds): a fault latched meanwhile counts.
                recipe = (facts.recipe_cards, facts.recipe_errors)
                facts = controller.facts(
                    trigger, recipe, probes=probes, recipe_blocks=facts.recipe_blocks
                )
            decision = decide(facts, self._clock())
            executors = controller.executors
            latched = isinstance(decision, StopAndLatch) and executors.latch_now(decision)
            context = Context(trigger, actor, restart, latched=latched)
            outcome = executors.carry_out(decision, context)
            if trigger is Trigger.BACKOFF_DUE and isinstance(decision, Start) and outcome.done:
                controller.streak.count_restart(self._clock())
            return StartAnswer(decision, outcome)

    def canary_action(self, action: str, reason: str) -> StartAnswer:
        """A failing canary round's ``on_fail``: one decision (restart, hold or none).

        Taken under the start lock like every start; a restart that was carried out counts
        for the breaker, as an automatic restart after a crash does.
        """
        controller = self._controller
        with self._lock:
            if controller.engine is None:
                return StartAnswer(NoAction("no engine is configured on this rig"))
            facts = controller.facts(
                Trigger.CANARY_FAIL, canary_action=action, canary_reason=reason
            )
            decision = decide(facts, self._clock())
            outcome = controller.executors.carry_out(
                decision, Context(Trigger.CANARY_FAIL, "recovery", restart=True)
            )
            if isinstance(decision, Start) and outcome.done:
                controller.streak.count_restart(self._clock())
            return StartAnswer(decision, outcome)

    def _probe_needed(self, facts: Facts) -> bool:
        if facts.latch is not None or facts.engine is EngineCondition.RUNNING:
            return False
        if facts.cards_held_by is not None:
            return False  # refused: the probe would run beside the diagnostic
        if facts.recipe_blocks:
            return False  # refused before any card is touched: a launch that would fail
        if facts.trigger in _AUTOMATIC:
            return facts.settings.autostart and not facts.operator_hold
        return True

    def live_cards(self) -> list[int]:
        """Every card that answers (what an automatic probe would probe)."""
        return self._cards(None)

    def _cards(self, wanted: frozenset[int] | None) -> list[int]:
        """The live cards to probe: the recipe's (``None``: every card)."""
        live = [card.index for card in self._rig.cards() if not card.lost]
        return [card for card in live if wanted is None or card in wanted]

    def _probe_for_start(self, facts: Facts) -> tuple[CardProbe, ...]:
        if self._clock() - self._probe_passed_at_s < PROBE_FRESH_S:
            self._probe_passed_at_s = float("-inf")  # one start per passed probe
            return ()
        cards = self._cards(facts.recipe_cards)
        if not cards:
            return ()
        return self._run("before an engine start", cards)

    def _run(self, why: str, cards: Sequence[int]) -> tuple[CardProbe, ...]:
        results = tuple(self._prober.probe(cards))
        self.limiter.note(cards)
        self._rig.note_probes(ProbeRound(datetime.now(UTC), results))
        self._controller.record_probe(why, probe_summary(results))
        return results

    def probe(self, why: str, cards: Sequence[int] | None = None) -> str | None:
        """Probe (the engine stopped) and decide on the results; the failure, or None."""
        controller = self._controller
        with self._lock:
            if self._held_by is not None:
                LOG.info("no CUDA probe %s: %s has the cards", why, self._held_by)
                return None
            chosen = list(cards) if cards is not None else self._cards(None)
            if not chosen:
                return None
            results = self._run(why, chosen)
            decision = decide(controller.facts(Trigger.PROBE, probes=results), self._clock())
            if isinstance(decision, StopAndLatch):
                controller.act(decision, Trigger.PROBE)
                self._rig.rejudge()
                return decision.reason
            self._probe_passed_at_s = self._clock()
            return None
