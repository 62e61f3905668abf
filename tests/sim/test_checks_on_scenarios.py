"""The built-in scenarios through the real one-shot check: each shows what it is named for.

Real rig, real kernel log, real parser, catalogue and checks; the check's sleep between
samples advances the stand-in monotonic clock instead of waiting.
"""

from __future__ import annotations

import pytest

from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.model import CheckResult, RigProfile, Severity
from hwcheck.oneshot import run_local_check
from hwcheck.sim.rig import SimulatedRig
from tests.support.clocks import ManualClock
from tests.support.sim_rigs import RigFactory


def check(rig: SimulatedRig, clock: ManualClock) -> list[CheckResult]:
    report = run_local_check(
        rig.host_sources(), RigProfile(card_count=4), XidCatalogue(), sleep=clock.advance
    )
    return list(report.results)


def not_ok(results: list[CheckResult]) -> set[tuple[str, int | None, Severity]]:
    return {(r.id, r.card, r.severity) for r in results if r.severity is not Severity.OK}


def test_healthy_passes_every_check(make_rig: RigFactory, clock: ManualClock) -> None:
    results = check(make_rig("healthy"), clock)
    assert results
    assert not_ok(results) == set()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("locked-vram", {("vram_unlocked", 2, Severity.CRITICAL)}),
        ("uncapped", {("power_cap", card, Severity.WARNING) for card in range(4)}),
        ("power-brake", {("power_brake", card, Severity.CRITICAL) for card in range(4)}),
    ],
)
def test_each_fault_scenario_shows_its_fault(
    make_rig: RigFactory, clock: ManualClock, name: str, expected: set[tuple[str, int, Severity]]
) -> None:
    found = not_ok(check(make_rig(name), clock))
    assert expected <= found
    assert {item[0] for item in found} == {item[0] for item in expected}


def test_xid31_is_seen_once_it_fired(make_rig: RigFactory, clock: ManualClock) -> None:
    rig = make_rig("xid31")
    assert not_ok(check(rig, clock)) == set()
    clock.advance(20)
    found = not_ok(check(rig, clock))
    assert ("xid_since_boot", 1, Severity.CRITICAL) in found


def test_a_lost_card_is_critical(make_rig: RigFactory, clock: ManualClock) -> None:
    rig = make_rig("healthy")
    rig.lose_card(3)
    found = not_ok(check(rig, clock))
    assert any(card == 3 and severity is Severity.CRITICAL for _, card, severity in found)
