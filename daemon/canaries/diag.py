"""Diagnostics fleetd runs on request: the memory test (``POST /api/v1/diag/memtest``).

The test needs the cards to itself: it takes them from recovery's start path (which waits
for a start or CUDA probe under way, then refuses every start, as ``cards_busy``, and runs
no probe until the test ends), and it is refused while the engine runs or is about to
(its state: anything but stopped, failed or held). Each run is stored as an event with every card's result, and each
card's verdict is kept until the next run that tests it: a failure stays CRITICAL for
that card (the ``memtest`` check judges ``reading()``) until a passing run, across
restarts and reboots. Every card runs at once (a child each); while they run,
``GET /api/v1/diag/memtest`` carries each card's progress (pattern, pass, sweep), which
fleetctl shows on a terminal.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from daemon.canaries.card_diag import (
    WATCH_EVERY_S,
    CardDiagService,
    ThermalGuard,
    cards_to_test,
    refuse_while_the_engine_runs,
)
from daemon.engine.service import EngineService
from daemon.rig.monitor import RigMonitor
from daemon.store import Store
from hwcheck.carddiag.diagnoser import SubprocessDiagnoser
from hwcheck.carddiag.model import DiagKind, ThermalLimits
from hwcheck.checks.readings import MemtestReading
from hwcheck.host import HostSources
from hwcheck.memtest.children import SubprocessMemtester
from hwcheck.memtest.results import (
    CardMemtest,
    Memtester,
    MemtestOutcome,
    MemtestPlan,
    MemtestProgress,
    run_on_cards,
)
from hwcheck.model import RigProfile
from hwcheck.thermal_stop import StopAsked
from serving.errors import Busy, InvalidInput, Unavailable
from serving.runtime.states import ServingState

log = logging.getLogger("fleetd")

# The engine holds no card in these states (a backoff restarts it soon: not idle).
MIB_PER_GIB = 1024
MEMTEST = "the memory test"

# Takes the cards for a diagnostic (``recovery.starts.StartPath.cards_held``).
HoldCards = Callable[[str], AbstractContextManager[None]]


def exit_code(results: list[CardMemtest]) -> int:
    """fleetctl's exit: 2 when a card failed, 1 when one could not be tested, else 0."""
    if any(r.outcome.failure or r.outcome is MemtestOutcome.STOPPED_HOT for r in results):
        return 2  # a stopped-hot card is a finding too: never a pass
    return 0 if all(r.outcome is MemtestOutcome.PASSED for r in results) else 1


class DiagService:
    """Runs the memory test for the API, records it, and judges the stored verdicts."""

    def __init__(
        self,
        store: Store,
        monitor: RigMonitor,
        memtester: Memtester,
        engine_state: Callable[[], tuple[ServingState, int | None]] | None,
        hold_cards: HoldCards | None = None,
        rejudge: Callable[[], None] | None = None,
        stop_for: Callable[[int], StopAsked] | None = None,
    ) -> None:
        self._store = store
        self._monitor = monitor
        self._memtester = memtester
        self._engine_state = engine_state
        self._hold_cards: HoldCards = hold_cards or (lambda _what: nullcontext())
        # A verdict changes the ``memtest`` check: judged at once, so the status read right
        # after the run shows it rather than the one from before until the next poll.
        self._rejudge = rejudge or (lambda: None)
        self._stop_for = stop_for  # each card's thermal guard ([diag] stop_core_c, stop_hbm_c)
        self._running = threading.Lock()
        self._lock = threading.Lock()
        self._verdicts = store.memtest_verdicts()
        self._progress: dict[int, MemtestProgress] = {}
        self.cards: CardDiagService | None = None  # diag pcie and compute (build_diag)

    def card_diag(
        self, kind: DiagKind, card: int | None, actor: str, seconds: float = 0.0
    ) -> dict[str, Any]:
        """``POST /api/v1/diag/pcie|compute``: run it now (refusals are ``serving.errors``)."""
        if self.cards is None:
            raise Unavailable("no card diagnostics in this daemon", "no_diag")
        return self.cards.run(kind, card, actor, seconds)

    # -- the memory test -------------------------------------------------------------

    def memtest(
        self,
        card: int | Sequence[int] | None,
        plan: MemtestPlan,
        actor: str,
        seed: int | None = None,
    ) -> dict[str, Any]:
        """Run ``plan`` on ``card`` (one, several, or every card when None), all at once.

        ``seed``: the random data's (None: a fresh one, reported in the document).
        """
        plan = dataclasses.replace(plan, seed=secrets.randbits(32) if seed is None else seed)
        if not self._running.acquire(blocking=False):
            raise Busy("a memory test is already running", "memtest_running")
        try:
            with self._hold_cards(MEMTEST):
                self._refuse_while_the_engine_runs()
                cards = self._cards(card)
                if plan.mib is not None:
                    self._refuse_more_than_the_cards_have([index for index, _ in cards], plan.mib)
                log.info(
                    "memory test of card(s) %s: %s (%s)",
                    [index for index, _ in cards],
                    plan_text(plan),
                    actor,
                )
                results = run_on_cards(
                    self._memtester,
                    [index for index, _ in cards],
                    plan,
                    self._on_progress,
                    self._stop_for,
                )
        finally:
            with self._lock:
                self._progress.clear()
            self._running.release()
        return self._record(results, dict(cards), plan, actor)

    def _on_progress(self, progress: MemtestProgress) -> None:
        with self._lock:
            self._progress[progress.card] = progress

    def _refuse_while_the_engine_runs(self) -> None:
        refuse_while_the_engine_runs(self._engine_state, MEMTEST)

    def _refuse_more_than_the_cards_have(self, cards: list[int], mib: int) -> None:
        """Refuse a size above a card's memory, in one line, before anything runs.

        A run asked for 256 GiB on 64 GiB cards once reported "passed, 262,144 MiB
        tested": a verdict about memory that does not exist. Whatever cannot be tested is
        refused with what can be (the card's memory as the last poll read it).
        """
        latest = self._monitor.view().latest
        known = {c.index: c.memory_total_mib for c in latest.cards} if latest is not None else {}
        short = [(index, known[index]) for index in cards if (known.get(index) or mib) < mib]
        if short:
            index, total_mib = min(short, key=lambda item: item[1] or 0)
            most = (total_mib or 0) // MIB_PER_GIB
            raise InvalidInput(
                f"--gib {mib / MIB_PER_GIB:g} is more than card {index} has ({total_mib:,} MiB): ask for at "
                f"most {most} GiB per card",
                "memtest_too_large",
            )

    def _cards(self, card: int | Sequence[int] | None) -> list[tuple[int, str]]:
        """``(index, PCI address)`` of the cards to test (the live ones of the last poll)."""
        return [(c.index, c.pci_bus_id) for c in cards_to_test(self._monitor, card)]

    def _not_retested(
        self, results: list[CardMemtest], addresses: dict[int, str], plan: MemtestPlan
    ) -> dict[str, str]:
        """A pass that does not cover what failed before on its card: address -> why.

        The failure stands (a plain run does not clear what only the stress mode found).
        """
        with self._lock:
            stored = MemtestReading.from_stored(self._verdicts).verdicts
        minutes = plan.stress_s / 60
        found: dict[str, str] = {}
        for result in results:
            before = stored.get(addresses[result.card])
            if result.outcome is not MemtestOutcome.PASSED or before is None:
                continue
            if not before.result.outcome.failure:
                continue
            need = before.retest
            if not need.covered_by(plan.patterns, minutes):
                found[addresses[result.card]] = (
                    f"card {result.card} passed, but this run did not test what failed "
                    f"({need.what()}): the failure stands; run {need.command(result.card)}"
                )
        return found

    def _record(
        self,
        results: list[CardMemtest],
        addresses: dict[int, str],
        plan: MemtestPlan,
        actor: str,
    ) -> dict[str, Any]:
        summaries = [r.summary() for r in results]
        failed = [r.card for r in results if r.outcome.failure]
        head = (
            f"memory test found errors on card(s) {', '.join(map(str, failed))}"
            if failed
            else "memory test"
        )
        kept = self._not_retested(results, addresses, plan)
        message = f"{head}: " + "; ".join([*summaries, *kept.values()])
        documents = [{**r.as_dict(), "pci_bus_id": addresses[r.card]} for r in results]
        run = plan_document(plan)
        details = {"memtest": documents, **run, "actor": actor}
        pairs = [(r, addresses[r.card]) for r in results]
        self._store.record_memtest(
            pairs, message=message, details=details, minutes=plan.stress_s / 60, kept=kept
        )
        with self._lock:
            self._verdicts = self._store.memtest_verdicts()
        log.log(logging.ERROR if failed else logging.INFO, "%s", message)
        self._rejudge()
        code = exit_code(results)
        return {
            **run,
            "cards": documents,
            "exit_code": max(code, 1) if kept else code,
            "message": message,
            "not_cleared": list(kept.values()),
        }

    # -- what the daemon shows -------------------------------------------------------

    def reading(self) -> MemtestReading:
        """The ``memtest`` check's reading (``hwcheck.checks.memtest``): the stored verdicts."""
        with self._lock:
            verdicts = dict(self._verdicts)
        return MemtestReading.from_stored(verdicts)

    def memtest_document(self) -> dict[str, Any]:
        """``GET /api/v1/diag/memtest``: whether one runs, and each card's last verdict."""
        with self._lock:
            verdicts = dict(self._verdicts)
            progress = [p.as_dict() for _, p in sorted(self._progress.items())]
        cards = [
            {**verdict, "pci_bus_id": address} for address, verdict in sorted(verdicts.items())
        ]
        return {"running": self._running.locked(), "cards": cards, "progress": progress}


def plan_document(plan: MemtestPlan) -> dict[str, Any]:
    """The run's settings as the API reports them (``gib`` None: all free memory)."""
    return {
        "gib": None if plan.mib is None else round(plan.mib / MIB_PER_GIB, 3),
        "patterns": list(plan.patterns),
        "passes": plan.passes,
        "minutes": round(plan.stress_s / 60, 3),
        "inject": plan.inject,
        "seed": plan.seed,
    }


def plan_text(plan: MemtestPlan) -> str:
    """``all free memory, solid+random x1, 2 min stress, seed 1234`` for the log."""
    size = "all free memory" if plan.mib is None else f"{plan.mib:,} MiB each"
    parts = [size, f"{'+'.join(plan.patterns) or 'no pattern'} x{plan.passes}"]
    if plan.stress_s:
        parts.append(f"{plan.stress_s / 60:g} min stress")
    if plan.inject:
        parts.append("self-test faults planted")
    parts.append(f"seed {plan.seed}")
    return ", ".join(parts)


def build_diag(
    store: Store,
    monitor: RigMonitor,
    host: HostSources,
    engine: EngineService | None,
    hold_cards: HoldCards,
    rejudge: Callable[[], None],
    *,
    rig: RigProfile | None = None,
    limits: ThermalLimits | None = None,
) -> DiagService:
    """fleetd's diagnostics: the scenario's under ``--simulate``, else the real ones.

    While a test runs, recovery (``hold_cards``) refuses every start and runs no probe.
    The card diagnostics' thermal guard reads at 1 s on a rig; on a simulated one, whose
    steps take no time, at every step.
    """
    memtester = host.memtester or SubprocessMemtester()
    engine_state = None if engine is None else engine.state
    watch_every_s = 0.0 if host.simulated else WATCH_EVERY_S
    thermal = limits or ThermalLimits()

    def guard(card: int) -> ThermalGuard:
        return ThermalGuard(host.gpu, card, thermal, watch_every_s)

    service = DiagService(
        store, monitor, memtester, engine_state, hold_cards, rejudge, stop_for=guard
    )
    service.cards = CardDiagService(
        store,
        monitor,
        host.gpu,
        host.diagnoser or SubprocessDiagnoser(),
        engine_state,
        hold_cards,
        rig or RigProfile(),
        thermal,
        watch_every_s=watch_every_s,
    )
    return service
