"""A retest clears a memory-test failure only when it tests what failed.

``bad-hbm``: card 1's HBM fails only under the stress mode ("return the card"). A plain
``fleetctl diag memtest --card 1`` (no ``--minutes``) passes, and used to resolve the
failure; now the failure stands, the run says why, and the fix line gives the exact run
(``--minutes``) that can clear it.
"""

from __future__ import annotations

from daemon.canaries.diag import DiagService
from daemon.rig.monitor import RigMonitor
from daemon.store import Store
from hwcheck.checks import memtest as memtest_check
from hwcheck.memtest.patterns import PATTERNS
from hwcheck.memtest.results import (
    CardMemtest,
    MemtestOutcome,
    MemtestPlan,
    PatternRun,
    ProgressSink,
)
from hwcheck.memtest.retest import Retest, retest_of
from hwcheck.model import CheckResult, Severity
from hwcheck.sim.rig import SimulatedRig
from serving.runtime.states import ServingState


class Healed:
    """A card that passes whatever it is asked (its runs: the plan's patterns, then stress)."""

    def test(self, card: int, plan: MemtestPlan, progress: ProgressSink) -> CardMemtest:
        runs = [PatternRun(p) for p in plan.patterns]
        if plan.stress_s:
            runs.append(PatternRun("stress", duration_s=plan.stress_s, cycles=10))
        return CardMemtest(card, MemtestOutcome.PASSED, tested_mib=1, runs=tuple(runs))


def _service(store: Store, monitor: RigMonitor, memtester: object) -> DiagService:
    def idle() -> tuple[ServingState, int | None]:
        return ServingState.STOPPED, None

    return DiagService(store, monitor, memtester, idle)  # type: ignore[arg-type]


def _card(service: DiagService, monitor: RigMonitor, card: int) -> CheckResult:
    latest = monitor.view().latest
    assert latest is not None
    results = memtest_check.judge(latest.cards, service.reading())
    return next(r for r in results if r.card == card)


def test_a_stress_only_failure_is_not_cleared_by_a_plain_run(
    store: Store, monitor: RigMonitor, rig: SimulatedRig
) -> None:
    memtester = rig.host_sources().memtester
    assert memtester is not None
    failed = _service(store, monitor, memtester).memtest(1, MemtestPlan(stress_s=120), "cli")
    assert failed["exit_code"] == 2
    assert failed["cards"][0]["verdict"].endswith("return the card")
    check = _card(_service(store, monitor, Healed()), monitor, 1)
    assert check.severity is Severity.CRITICAL
    assert "`fleetctl diag memtest --card 1 --minutes 2`" in check.remedy

    # The plain run its old fix line prescribed: it passes, and clears nothing.
    service = _service(store, monitor, Healed())
    plain = service.memtest(1, MemtestPlan(), "cli")
    assert [c["outcome"] for c in plain["cards"]] == ["passed"]
    assert plain["exit_code"] == 1
    (why,) = plain["not_cleared"]
    assert "did not test what failed (the stress mode (2 min))" in why
    assert "fleetctl diag memtest --card 1 --minutes 2" in why
    assert why in plain["message"]
    assert _card(service, monitor, 1).severity is Severity.CRITICAL
    # Shorter stress does not cover it either; the run the fix line gives does.
    assert service.memtest(1, MemtestPlan(stress_s=60), "cli")["not_cleared"]
    assert _card(service, monitor, 1).severity is Severity.CRITICAL
    cleared = service.memtest(1, MemtestPlan(stress_s=120), "cli")
    assert cleared["exit_code"] == 0 and cleared["not_cleared"] == []
    assert _card(service, monitor, 1).severity is Severity.OK


def test_a_fixed_pattern_failure_needs_that_pattern_and_names_it() -> None:
    result = CardMemtest(
        3,
        MemtestOutcome.FAILED,
        runs=(PatternRun("solid"), PatternRun("walking", bad_words=4, bit_errors=9)),
    )
    need = retest_of(result, 0.0)
    assert need == Retest(("walking",), 0.0)
    assert need.command(3) == "fleetctl diag memtest --card 3 --patterns walking"
    assert need.covered_by(PATTERNS, 0.0) and not need.covered_by(("solid",), 5.0)
    # A stored verdict from before the run's minutes were kept: read from its stress run.
    stress = CardMemtest(
        1, MemtestOutcome.FAILED, runs=(PatternRun("stress", bad_words=9, duration_s=150.0),)
    )
    assert retest_of(stress, None) == Retest((), 3.0)
