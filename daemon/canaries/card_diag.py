"""``fleetctl diag pcie`` and ``diag compute``: the link and the compute units, on request.

Like the memory test (``daemon.canaries.diag``), a run needs the cards to itself: it takes
them from recovery's start path (no start, no CUDA probe meanwhile) and is refused while
the engine runs. Every card runs at once (a thread each, a child process each on a rig);
the link is then measured on each card alone, so a shared switch shows as the difference.
A thermal guard reads each card's core and HBM temperature (through the same backend the
poller uses: NVML on a rig) at most once a second and stops that card's run at
``[diag] stop_core_c``/``stop_hbm_c``: the card is ``stopped_hot``, never passed. Each
run is stored as a ``diag`` event with every card's identity (UUID, serial, bus id),
which the card's passport reads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any

from daemon.rig.monitor import RigMonitor
from daemon.store import Store
from hwcheck.backend import BackendError, GpuBackend
from hwcheck.carddiag.diagnoser import Diagnoser
from hwcheck.carddiag.model import (
    CardDiag,
    DiagKind,
    DiagOutcome,
    DiagPlan,
    ThermalLimits,
)
from hwcheck.carddiag.pcie import Link, LinkFigures, judge
from hwcheck.model import EventKind, GpuSnapshot, RigProfile, Severity
from serving.errors import Busy, Conflict, InvalidInput, NotFound, Refused
from serving.runtime.states import ServingState

log = logging.getLogger("fleetd")

ENGINE_IDLE = frozenset({ServingState.STOPPED, ServingState.FAILED, ServingState.HELD})
WATCH_EVERY_S = 1.0
WHAT = {DiagKind.PCIE: "the link test", DiagKind.COMPUTE: "the compute test"}

HoldCards = Callable[[str], AbstractContextManager[None]]


def refuse_while_the_engine_runs(
    engine_state: Callable[[], tuple[ServingState, int | None]] | None, what: str
) -> None:
    """``Refused`` (exit 4) unless the engine holds no card: every on-card test needs them all."""
    if engine_state is None:
        return
    state, pid = engine_state()
    if state not in ENGINE_IDLE or pid is not None:
        raise Refused(
            f"the engine is {state.value}: stop it first (fleetctl stop); {what} needs the "
            "cards to itself",
            "engine_running",
        )


def cards_to_test(monitor: RigMonitor, card: int | Sequence[int] | None) -> list[GpuSnapshot]:
    """The live cards of the last poll to test, or why there are none.

    ``card``: one index or several (``diag memtest --card 0 --card 1``: both, in index
    order, each at most once); None: every live card.
    """
    latest = monitor.view().latest
    if latest is None:
        raise Conflict("no poll of the cards yet: try again in a moment", "no_data")
    live = [c for c in latest.cards if not c.lost]
    if card is None:
        if not live:
            raise Conflict("no card answers: nothing to test", "no_cards")
        return live
    known = {c.index: c for c in latest.cards}
    wanted = sorted({card} if isinstance(card, int) else set(card))
    if not wanted:
        raise InvalidInput("no card named: give one or more card indexes", "no_such_card")
    for index in wanted:
        if index not in known:
            raise NotFound(f"card {index} does not exist (cards: {sorted(known)})", "no_such_card")
        if known[index].lost:
            raise Conflict(f"card {index} is lost: reboot before testing it", "card_lost")
    return [known[index] for index in wanted]


class ThermalGuard:
    """Why card ``card`` must stop now (too hot), read at most every ``every_s``."""

    def __init__(
        self, gpu: GpuBackend, card: int, limits: ThermalLimits, every_s: float = WATCH_EVERY_S
    ) -> None:
        self._gpu = gpu
        self._card = card
        self._limits = limits
        self._every_s = every_s
        self._last_s = float("-inf")
        self.reason: str | None = None

    def __call__(self) -> str | None:
        """The breach that stops the run (kept once seen), or None."""
        if self.reason is not None:
            return self.reason
        now_s = time.monotonic()
        if now_s - self._last_s < self._every_s:
            return None
        self._last_s = now_s
        try:
            cards = {card.index: card for card in self._gpu.snapshot().cards}
        except BackendError:
            return None  # the poller reports a backend that fails; the run goes on
        card = cards.get(self._card)
        if card is None:
            return None
        breach = self._limits.breach(card.temperature_c, card.memory_temperature_c)
        if breach is not None:
            self.reason = f"card {self._card} {breach}"
        return self.reason


def exit_code(results: list[CardDiag]) -> int:
    """fleetctl's exit: 2 a finding (wrong, slow, hot), 1 a card not tested, else 0."""
    if any(result.outcome.failure for result in results):
        return 2
    return 0 if all(r.outcome is DiagOutcome.PASSED for r in results) else 1


class CardDiagService:
    """Runs ``diag pcie`` and ``diag compute`` for the API, records and returns them."""

    def __init__(
        self,
        store: Store,
        monitor: RigMonitor,
        gpu: GpuBackend,
        diagnoser: Diagnoser,
        engine_state: Callable[[], tuple[ServingState, int | None]] | None,
        hold_cards: HoldCards,
        rig: RigProfile,
        limits: ThermalLimits,
        watch_every_s: float = WATCH_EVERY_S,
    ) -> None:
        self._store = store
        self._monitor = monitor
        self._gpu = gpu
        self._diagnoser = diagnoser
        self._engine_state = engine_state
        self._hold_cards = hold_cards
        self._rig = rig
        self._limits = limits
        self._watch_every_s = watch_every_s
        self._running = threading.Lock()

    def run(
        self, kind: DiagKind, card: int | None, actor: str, seconds: float = 0.0
    ) -> dict[str, Any]:
        """Run ``kind`` on ``card`` (every live card when None); the run's document."""
        if not self._running.acquire(blocking=False):
            raise Busy("a card diagnostic is already running", "diag_running")
        try:
            with self._hold_cards(WHAT[kind]):
                self._refuse_while_the_engine_runs(kind)
                cards = self._cards(card)
                plan = DiagPlan(kind, seconds=seconds)
                log.info("%s of card(s) %s (%s)", WHAT[kind], [c.index for c in cards], actor)
                if kind is DiagKind.COMPUTE:
                    results = self._compute(cards, plan)
                else:
                    results = self._pcie(cards, plan)
        finally:
            self._running.release()
        return self._record(kind, results, cards, plan, actor)

    def _guard(self, card: int) -> ThermalGuard:
        return ThermalGuard(self._gpu, card, self._limits, self._watch_every_s)

    def _parallel(self, cards: list[int], work: Callable[[int], Any]) -> dict[int, Any]:
        with ThreadPoolExecutor(max_workers=max(1, len(cards)), thread_name_prefix="diag") as pool:
            futures = {index: pool.submit(work, index) for index in cards}
            return {index: future.result() for index, future in futures.items()}

    def _compute(self, cards: list[GpuSnapshot], plan: DiagPlan) -> list[CardDiag]:
        indices = [c.index for c in cards]
        done = self._parallel(
            indices, lambda index: self._diagnoser.compute(index, plan, self._guard(index))
        )
        return [done[index] for index in indices]

    def _pcie(self, cards: list[GpuSnapshot], plan: DiagPlan) -> list[CardDiag]:
        """Every card at once, then each alone; judged against the link each trained at."""
        indices = [c.index for c in cards]
        together = self._parallel(
            indices, lambda index: self._diagnoser.link(index, plan, self._guard(index))
        )
        alone: dict[int, LinkFigures | CardDiag] = {}
        if len(indices) > 1:
            for index in indices:
                if isinstance(together[index], LinkFigures):
                    alone[index] = self._diagnoser.link(index, plan, self._guard(index))
        links = self._links(indices)
        results: list[CardDiag] = []
        for index in indices:
            first, single = together[index], alone.get(index)
            if isinstance(first, CardDiag):
                results.append(first)  # it could not be measured (error, too hot)
            elif isinstance(single, CardDiag):
                results.append(single)
            elif single is None:  # one card: all at once is alone
                results.append(judge(index, links[index], None, first))
            else:
                results.append(judge(index, links[index], first, single))
        return results

    def _links(self, indices: list[int]) -> dict[int, Link]:
        """Each card's link as NVML reads it now (after the load), and what the rig expects."""
        try:
            snapshot = {card.index: card for card in self._gpu.snapshot().cards}
        except BackendError:
            latest = self._monitor.view().latest
            snapshot = {} if latest is None else {card.index: card for card in latest.cards}
        links: dict[int, Link] = {}
        for index in indices:
            card = snapshot.get(index)
            links[index] = Link(
                None if card is None else card.pcie_gen_current,
                None if card is None else card.pcie_width_current,
                None if card is None else card.pcie_gen_max,
                None if card is None else card.pcie_width_max,
                self._rig.pcie_gen_min,
                self._rig.pcie_width_min,
            )
        return links

    def _refuse_while_the_engine_runs(self, kind: DiagKind) -> None:
        refuse_while_the_engine_runs(self._engine_state, WHAT[kind])

    def _cards(self, card: int | None) -> list[GpuSnapshot]:
        return cards_to_test(self._monitor, card)

    def _record(
        self,
        kind: DiagKind,
        results: list[CardDiag],
        cards: list[GpuSnapshot],
        plan: DiagPlan,
        actor: str,
    ) -> dict[str, Any]:
        by_index = {card.index: card for card in cards}
        documents = []
        for result in results:
            card = by_index[result.card]
            documents.append(
                {
                    **result.as_dict(),
                    "pci_bus_id": card.pci_bus_id,
                    "uuid": card.uuid,
                    "serial": card.serial,
                }
            )
        bad = [r.card for r in results if r.outcome.failure]
        head = f"{kind} diagnostic " + (
            f"found a problem on card(s) {', '.join(map(str, bad))}" if bad else "passed"
        )
        message = f"{head}: " + "; ".join(result.line() for result in results)
        details = {"diag": str(kind), "cards": documents, "seconds": plan.seconds, "actor": actor}
        severity = Severity.CRITICAL if bad else Severity.INFO
        card_index = results[0].card if len(results) == 1 else None
        self._store.record_event(EventKind.DIAG, severity, message, card_index, details=details)
        log.log(logging.ERROR if bad else logging.INFO, "%s", message)
        return {
            "kind": str(kind),
            "seconds": plan.seconds,
            "cards": documents,
            "exit_code": exit_code(results),
            "message": message,
        }
