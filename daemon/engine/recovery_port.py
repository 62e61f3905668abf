"""The engine as recovery drives it, and the supervisor's reports as recovery hears them.

``SupervisedEngine`` implements ``recovery.ports.EnginePort`` over a supervisor: its
mechanics (start, stop, restart, the backoff, the hold) plus what the start gate reads of
the recipe (the cards it uses, its lint errors) and a person's stop (the engine service
keeps it). Only recovery's executors call its moves: fleetd's supervisor refuses a move
asked for without recovery's token (``recovery.moves``). ``for_service`` builds it over fleetd's engine service. ``ReportsToRecovery``
is the supervisor's ``EngineReports`` listener: an ended run and a backoff's end go to the
controller, which answers through the port. Neither decides anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from daemon.engine.service import EngineService
from hwcheck.model import GpuSnapshot
from recovery.decisions import Reason
from recovery.facts import EngineCondition, EngineExit
from recovery.ports import Launched, StopKind
from serving.errors import Refused, Unavailable
from serving.recipe.cards import gate_cards
from serving.runtime.reports import RunEnded
from serving.runtime.start_kind import StartFor
from serving.runtime.states import ServingState, StartRefused, SupervisorClosed
from serving.runtime.supervisor import Supervisor

# An engine process exists (or is about to) in these states.
RUNNING_STATES = frozenset(
    {ServingState.STARTING, ServingState.READY, ServingState.UNHEALTHY, ServingState.STOPPING}
)


def cards_of(gpus: str, cards: tuple[GpuSnapshot, ...]) -> frozenset[int] | None:
    """The card indices a recipe's ``gpus`` names (``None``: every card).

    ``gpus`` is ``all`` or a comma-separated list of indices or UUIDs; a UUID is found
    among ``cards`` (the last poll). Nothing recognised reads as every card
    (``serving.recipe.cards.gate_cards``).
    """
    return gate_cards(gpus, [(card.index, card.uuid) for card in cards])


class PersonsStop(Protocol):
    """A person's stop, which automatic starts respect (the engine service keeps it)."""

    def held_by_a_person(self) -> bool:
        """A person's stop or a breaker hold."""
        ...

    def person_starts(self) -> None:
        """A person started it: their earlier stop no longer holds autostart back."""
        ...

    def person_stops(self) -> None:
        """A person stopped it: automatic starts leave it down (across fleetd restarts)."""
        ...

    def hold_down(self) -> None:
        """Recovery stops it for a person to start again (as a person's stop does)."""
        ...


class SupervisedEngine:
    """``EnginePort`` on a supervisor (fleetd's: ``for_service``)."""

    def __init__(
        self,
        supervisor: Supervisor,
        *,
        gpus: Callable[[], str] = lambda: "all",
        cards: Callable[[], tuple[GpuSnapshot, ...]] = tuple,
        lint_errors: Callable[[], tuple[str, ...]] = tuple,
        recipe_blocks: Callable[[], tuple[Reason, ...]] = tuple,
        persons_stop: PersonsStop | None = None,
    ) -> None:
        self._supervisor = supervisor
        self._gpus = gpus
        self._cards = cards
        self._lint_errors = lint_errors
        self._recipe_blocks = recipe_blocks
        self._persons_stop = persons_stop

    @classmethod
    def for_service(
        cls, engine: EngineService, cards: Callable[[], tuple[GpuSnapshot, ...]]
    ) -> SupervisedEngine:
        """fleetd's engine: its recipe's cards and lint errors, its person's stop."""
        return cls(
            engine.supervisor,
            gpus=lambda: engine.recipe.gpus,
            cards=cards,
            lint_errors=engine.lint_errors,
            recipe_blocks=engine.checkpoint_blocks,
            persons_stop=engine,
        )

    def condition(self) -> EngineCondition:
        """Whether an engine process exists (or is about to)."""
        status = self._supervisor.status()
        running = status.pid is not None or status.state in RUNNING_STATES
        return EngineCondition.RUNNING if running else EngineCondition.STOPPED

    def held_by_a_person(self) -> bool:
        """A person's stop or a breaker hold."""
        if self._persons_stop is not None:
            return self._persons_stop.held_by_a_person()
        return self._supervisor.status().state is ServingState.HELD

    def recipe_cards(self) -> frozenset[int] | None:
        """The cards the recipe uses."""
        return cards_of(self._gpus(), self._cards())

    def recipe_errors(self) -> tuple[str, ...]:
        """The recipe's lint errors."""
        return self._lint_errors()

    def recipe_blocks(self) -> tuple[Reason, ...]:
        """The checkpoint's shards missing or short (quick depth)."""
        return self._recipe_blocks()

    def _person_starts(self) -> None:
        if self._persons_stop is not None:
            self._persons_stop.person_starts()

    def start(self, reason: str, kind: StartFor) -> Launched:
        """Launch; the mechanics' refusal as ``Refused``, every reason with its code."""
        if kind is StartFor.PERSON:
            self._person_starts()
        try:
            result = self._supervisor.start(reason, kind)
        except StartRefused as exc:
            reasons = tuple(Reason(r.code, r.message) for r in exc.refusals)
            first = reasons[0].code if reasons else "refused"
            raise Refused("; ".join(r.message for r in reasons), first, reasons) from None
        except SupervisorClosed:
            raise Unavailable("fleetd is shutting down", "closed") from None
        except TimeoutError:
            return Launched(None)  # the launch is under way; the status shows it
        warnings = tuple(Reason(w.code, w.message) for w in result.warnings)
        return Launched(result.pid, result.already_running, warnings)

    def restart(self, reason: str) -> None:
        """Stop cleanly, then launch (the supervisor finishes it in the background)."""
        self._person_starts()
        try:
            self._supervisor.restart(reason, wait=False)
        except SupervisorClosed:
            raise Unavailable("fleetd is shutting down", "closed") from None

    def stop(self, reason: str, kind: StopKind) -> bool:
        """Graceful stop, no restart, the reason shown; True when stopped.

        A person's stop is noted first (automatic starts then leave the engine down) and
        answered at once: True once accepted, the stop finishing in the background.
        """
        person = kind is StopKind.PERSON
        if person and self._persons_stop is not None:
            self._persons_stop.person_stops()
        try:
            state = self._supervisor.stop(reason, hold_reason=reason, wait=not person).state
        except SupervisorClosed:
            raise Unavailable("fleetd is shutting down", "closed") from None
        return person or state is ServingState.STOPPED

    def restart_after(self, delay_s: float, reason: str) -> None:
        """``backoff`` for ``delay_s``."""
        self._supervisor.restart_after(delay_s, reason)

    def hold(self, reason: str) -> None:
        """The breaker's hold."""
        self._supervisor.hold(reason)

    def stay_stopped(self, reason: str) -> None:
        """``stopped``, saying why."""
        self._supervisor.stay_stopped(reason)

    def restart_automatic(self, reason: str) -> None:
        """Stop cleanly, then launch, counted in the running restart total (background)."""
        try:
            self._supervisor.restart(reason, wait=False, kind=StartFor.RECOVERY_RESTART)
        except SupervisorClosed:
            raise Unavailable("fleetd is shutting down", "closed") from None

    def stop_and_hold(self, reason: str) -> bool:
        """Stop cleanly; automatic starts leave it down until a person starts it."""
        if self._persons_stop is not None:
            self._persons_stop.hold_down()
        try:
            state = self._supervisor.stop(reason, hold_reason=reason).state
        except SupervisorClosed:
            return False
        return state is ServingState.STOPPED


class EngineListener(Protocol):
    """What hears the supervisor's reports (``recovery.controller.RecoveryController``)."""

    def on_engine_exit(self, exit_: EngineExit) -> None:
        """A run ended on its own."""
        ...

    def on_backoff_due(self) -> None:
        """A backoff is over."""
        ...


class ReportsToRecovery:
    """The supervisor's ``EngineReports``, handed to recovery (never blocks the loop)."""

    def __init__(self) -> None:
        self._listener: EngineListener | None = None

    def attach(self, listener: EngineListener) -> None:
        """Who hears the reports (set once the controller exists)."""
        self._listener = listener

    def engine_exited(self, ended: RunEnded) -> None:
        """An ended run, as recovery's facts have it."""
        if self._listener is not None:
            self._listener.on_engine_exit(
                EngineExit(
                    crash_class=ended.crash_class,
                    exit_code=ended.exit_code,
                    signal=ended.signal,
                    description=ended.description,
                    ready_for_s=ended.ready_for_s,
                )
            )

    def backoff_due(self) -> None:
        """A backoff's end."""
        if self._listener is not None:
            self._listener.on_backoff_due()
