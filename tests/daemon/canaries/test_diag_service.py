"""The memory test as fleetd runs it: refused while the engine runs, one run at a time, the
cards taken from recovery while it runs, a failure critical until a passing run (a restart
keeps it).

Real store (SQLite), the simulated rig's own memory test (``bad-hbm``: card 3 has bad HBM).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from daemon.canaries.diag import DiagService
from daemon.rig.monitor import RigMonitor
from daemon.store import Store
from hwcheck.checks import memtest as memtest_check
from hwcheck.memtest.results import (
    CardMemtest,
    Memtester,
    MemtestOutcome,
    MemtestPlan,
    MemtestProgress,
    ProgressSink,
)
from hwcheck.model import CheckResult, EventKind, Severity
from hwcheck.sim.rig import SimulatedRig
from serving.errors import Busy, Conflict, InvalidInput, NotFound, Refused
from serving.runtime.states import ServingState


def memtest_results(service: DiagService, monitor: RigMonitor) -> list[CheckResult]:
    """The ``memtest`` check on the last poll's cards and the service's reading (each poll's)."""
    latest = monitor.view().latest
    assert latest is not None
    return memtest_check.judge(latest.cards, service.reading())


class Hold:
    """Recovery's ``cards_held`` as the memory test sees it: who holds the cards, or a refusal."""

    def __init__(self, refuse: Busy | None = None) -> None:
        self.held_by: str | None = None
        self.refuse = refuse

    @contextmanager
    def __call__(self, what: str) -> Iterator[None]:
        if self.refuse is not None:
            raise self.refuse
        self.held_by = what
        try:
            yield
        finally:
            self.held_by = None


PLAN = MemtestPlan(mib=1024, patterns=("solid", "moving-inversions"))


def diag(
    store: Store,
    monitor: RigMonitor,
    memtester: Memtester,
    state: ServingState = ServingState.STOPPED,
    pid: int | None = None,
    hold: Hold | None = None,
    rejudge: Callable[[], None] | None = None,
) -> DiagService:
    return DiagService(store, monitor, memtester, lambda: (state, pid), hold or Hold(), rejudge)


def sim_memtester(rig: SimulatedRig) -> Memtester:
    memtester = rig.host_sources().memtester
    assert memtester is not None
    return memtester


@pytest.mark.parametrize(
    ("state", "pid"),
    [
        (ServingState.READY, 4242),
        (ServingState.STARTING, 4242),
        (ServingState.BACKOFF, None),  # a restart is due: not idle
        (ServingState.STOPPED, 4242),  # a process still there
    ],
)
def test_refused_while_the_engine_runs_or_is_about_to(
    store: Store, monitor: RigMonitor, rig: SimulatedRig, state: ServingState, pid: int | None
) -> None:
    service = diag(store, monitor, sim_memtester(rig), state, pid)

    with pytest.raises(Refused) as caught:
        service.memtest(None, PLAN, "api")

    assert caught.value.code == "engine_running"
    assert "fleetctl stop" in caught.value.message
    assert store.list_events(kind=EventKind.DIAG) == []


def test_a_recorded_run_has_the_checks_judged_at_once_and_a_refused_one_not(
    store: Store, monitor: RigMonitor, rig: SimulatedRig
) -> None:
    """``fleetctl status`` right after a run shows its verdict, not the poll's before it."""
    judged: list[int] = []
    refused = diag(
        store,
        monitor,
        sim_memtester(rig),
        ServingState.READY,
        4242,
        rejudge=lambda: judged.append(1),
    )
    with pytest.raises(Refused):
        refused.memtest(None, PLAN, "api")
    assert judged == []

    def stored() -> None:
        judged.append(len(store.list_events(kind=EventKind.DIAG)))

    service = diag(store, monitor, sim_memtester(rig), ServingState.HELD, rejudge=stored)
    service.memtest(3, PLAN, "api")
    assert judged == [1]  # after the run was stored


def test_a_failure_stays_critical_for_its_card_until_a_passing_run(
    store: Store, monitor: RigMonitor, rig: SimulatedRig
) -> None:
    service = diag(store, monitor, sim_memtester(rig), ServingState.HELD)

    run = service.memtest(None, PLAN, "api", seed=77)

    assert run["exit_code"] == 2
    assert (run["patterns"], run["passes"], run["minutes"], run["seed"]) == (
        ["solid", "moving-inversions"],
        1,
        0,
        77,
    )
    assert [c["outcome"] for c in run["cards"]] == ["passed"] * 3 + ["failed"]
    card3 = run["cards"][3]
    assert card3["pci_bus_id"] == "0000:61:00.0"
    assert card3["tested_mib"] == 1  # the simulated memory
    assert card3["blocks_failed"] == 3
    assert "errors on card(s) 3" in run["message"]
    assert "a few fixed blocks" in run["message"]
    (event,) = store.list_events(kind=EventKind.DIAG)
    assert (event.severity, event.card) == (Severity.CRITICAL, 3)
    assert event.details is not None
    assert event.details["memtest"][3]["bit_errors"] == card3["bit_errors"] > 0
    assert event.details["seed"] == 77
    results = {r.card: r for r in memtest_results(service, monitor)}
    assert results[3].severity is Severity.CRITICAL
    assert f"{card3['bit_errors']:,} bit errors" in results[3].message
    assert "a few fixed blocks" in results[3].message
    assert "diag memtest --card 3" in results[3].remedy
    assert {results[i].severity for i in (0, 1, 2)} == {Severity.OK}
    overview = service.memtest_document()
    stored = {c["pci_bus_id"]: c["blocks"] for c in overview["cards"]}["0000:61:00.0"]
    assert [tuple(pair) for pair in stored] == list(card3["blocks"])  # the map is kept
    # a restarted fleetd reads the verdicts back
    restarted = diag(store, monitor, sim_memtester(rig))
    assert {r.card: r.severity for r in memtest_results(restarted, monitor)}[3] is Severity.CRITICAL

    class Healed:
        def test(self, card: int, plan: MemtestPlan, progress: ProgressSink) -> CardMemtest:
            return CardMemtest(card, MemtestOutcome.PASSED, tested_mib=plan.mib or 0)

    cleared = diag(store, monitor, Healed()).memtest(3, PLAN, "cli")

    assert cleared["exit_code"] == 0
    assert [c["card"] for c in cleared["cards"]] == [3]
    assert isinstance(cleared["seed"], int)  # a fresh seed when none was asked
    fresh = diag(store, monitor, Healed())
    assert {r.severity for r in memtest_results(fresh, monitor)} == {Severity.OK}


def test_the_stress_mode_finds_card_1_under_load(
    store: Store, monitor: RigMonitor, rig: SimulatedRig
) -> None:
    plan = MemtestPlan(patterns=(), stress_s=60)

    run = diag(store, monitor, sim_memtester(rig)).memtest(1, plan, "api")

    assert run["exit_code"] == 2
    (card,) = run["cards"]
    assert card["outcome"] == "failed"
    assert card["verdict"].startswith("errors everywhere under load")
    assert card["runs"][0]["pattern"] == "stress"
    assert run["minutes"] == 1


def test_one_run_at_a_time_every_card_at_once_with_progress_meanwhile(
    store: Store, monitor: RigMonitor
) -> None:
    release = threading.Event()
    started = threading.Barrier(5)  # the four cards' threads and this test
    hold = Hold()

    class Slow:
        def test(self, card: int, plan: MemtestPlan, progress: ProgressSink) -> CardMemtest:
            progress(MemtestProgress(card, "walking", 1, 1, card + 1, 128))
            started.wait(30)
            assert release.wait(30)
            return CardMemtest(card, MemtestOutcome.PASSED, tested_mib=plan.mib or 0)

    service = diag(store, monitor, Slow(), hold=hold)
    first = threading.Thread(target=service.memtest, args=(None, PLAN, "api"))
    first.start()
    try:
        started.wait(30)  # every card is under test at the same time
        document = service.memtest_document()
        assert document["running"] is True
        assert [(p["card"], p["pattern"], p["step"]) for p in document["progress"]] == [
            (0, "walking", 1),
            (1, "walking", 2),
            (2, "walking", 3),
            (3, "walking", 4),
        ]
        assert hold.held_by == "the memory test"  # recovery refuses starts and probes
        with pytest.raises(Busy):
            service.memtest(None, PLAN, "api")
    finally:
        release.set()
        first.join(30)
    assert hold.held_by is None
    assert service.memtest_document()["running"] is False
    assert service.memtest_document()["progress"] == []
    assert service.memtest_document()["cards"][0]["pci_bus_id"] == "0000:01:00.0"


def test_several_cards_are_each_tested_once_in_index_order(
    store: Store, monitor: RigMonitor, rig: SimulatedRig
) -> None:
    """``diag memtest --card 2 --card 0 --card 2``: cards 0 and 2, nothing else (issue 36)."""
    run = diag(store, monitor, sim_memtester(rig)).memtest([2, 0, 2], PLAN, "api")
    assert [card["card"] for card in run["cards"]] == [0, 2]
    with pytest.raises(NotFound):
        diag(store, monitor, sim_memtester(rig)).memtest([0, 9], PLAN, "api")


def test_unknown_lost_and_missing_cards(
    store: Store, monitor: RigMonitor, rig: SimulatedRig
) -> None:
    service = diag(store, monitor, sim_memtester(rig))
    with pytest.raises(NotFound):
        service.memtest(9, PLAN, "api")
    rig.lose_card(1)
    monitor.add_sample(rig.host_sources().gpu.snapshot())
    with pytest.raises(Conflict) as caught:
        service.memtest(1, PLAN, "api")
    assert caught.value.code == "card_lost"
    empty = DiagService(store, RigMonitor("boot", 3), sim_memtester(rig), None)
    with pytest.raises(Conflict):
        empty.memtest(None, PLAN, "api")


def test_a_card_that_could_not_be_tested_exits_1(store: Store, monitor: RigMonitor) -> None:
    class NoLibrary:
        def test(self, card: int, plan: MemtestPlan, progress: ProgressSink) -> CardMemtest:
            return CardMemtest(card, MemtestOutcome.UNAVAILABLE, error="no CUDA driver library")

    run = diag(store, monitor, NoLibrary()).memtest(0, PLAN, "api")

    assert run["exit_code"] == 1
    assert store.memtest_verdicts() == {}


def test_no_test_while_recovery_cannot_give_the_cards(
    store: Store, monitor: RigMonitor, rig: SimulatedRig
) -> None:
    busy = Busy("an engine start or a CUDA probe is under way: try again", "start_busy")
    service = diag(store, monitor, sim_memtester(rig), hold=Hold(busy))

    with pytest.raises(Busy) as caught:
        service.memtest(None, PLAN, "api")

    assert caught.value.code == "start_busy"
    assert store.list_events(kind=EventKind.DIAG) == []
    assert service.memtest_document()["running"] is False


def test_more_than_a_card_has_is_refused_in_one_line_and_nothing_runs(
    store: Store, monitor: RigMonitor, rig: SimulatedRig
) -> None:
    """256 GiB asked of 64 GiB cards once "passed, 262,144 MiB tested" (issue 33)."""
    memtester = sim_memtester(rig)
    service = diag(store, monitor, memtester, ServingState.HELD)
    with pytest.raises(InvalidInput) as caught:
        service.memtest(None, MemtestPlan(mib=256 * 1024, patterns=("solid",)), "api")
    assert caught.value.code == "memtest_too_large"
    assert caught.value.message == (
        "--gib 256 is more than card 0 has (65,536 MiB): ask for at most 64 GiB per card"
    )
    assert store.list_events(kind=EventKind.DIAG) == []
    assert service.memtest_document()["running"] is False
    run = service.memtest(2, MemtestPlan(mib=64 * 1024, patterns=("solid",)), "api")
    assert run["cards"][0]["outcome"] == "passed"  # all of it is fine
