"""run_checks over whole rigs, overall, card_states and CheckInput validation."""

from __future__ import annotations

import pytest

from hwcheck.checks import CHECK_IDS, CheckInput, card_states, overall, run_checks
from hwcheck.checks.base import fmt_num
from hwcheck.model import CheckResult, DeviceHolder, Severity
from tests.support.cards import (
    bus_id,
    make_braked_card,
    make_card,
    make_input,
    make_lost_card,
    make_rig,
    make_samples,
    make_xid,
)
from tests.support.contract import CONTRACT_CHECK_IDS

CONTRACT_IDS = CONTRACT_CHECK_IDS | {"card_lost", "nvml", "host_resources"}
PER_CARD = {
    "card_lost",
    "vram_unlocked",
    "power_brake",
    "power_cap",
    "pcie_link",
    "temperature",
    "persistence_mode",
}


def test_healthy_rig_passes_every_check_with_one_result_per_card() -> None:
    results = run_checks(make_input())

    assert set(CHECK_IDS) == CONTRACT_IDS
    assert {r.id for r in results} == CONTRACT_IDS
    assert all(r.severity is Severity.OK for r in results), [
        r for r in results if r.severity is not Severity.OK
    ]
    for check_id in PER_CARD:
        assert [r.card for r in results if r.id == check_id] == [0, 1, 2, 3], check_id
    assert overall(results) is Severity.OK
    assert card_states(results) == {0: "ok", 1: "ok", 2: "ok", 3: "ok"}


def test_results_follow_the_registry_order() -> None:
    order = [r.id for r in run_checks(make_input())]

    assert sorted(set(order), key=order.index) == list(CHECK_IDS)


def test_sick_rig_overall_and_states() -> None:
    poll = [
        make_card(0, power_limit_w=250.0),
        make_braked_card(1),
        make_card(2, memory_total_mib=8_192),
        make_lost_card(3),
    ]
    inp = make_input(
        make_samples(poll, poll, poll),
        xids=[make_xid(31, bus_id(0))],
        holders=[DeviceHolder(99, "Xorg", "/dev/nvidia0")],
    )

    results = run_checks(inp)

    assert overall(results) is Severity.CRITICAL
    assert card_states(results) == {0: "critical", 1: "critical", 2: "critical", 3: "lost"}


def test_card_state_is_warning_when_only_warnings() -> None:
    inp = make_input([make_rig([make_card(0, power_limit_w=250.0), make_card(1)])])

    assert card_states(run_checks(inp)) == {0: "warning", 1: "ok"}


def test_rig_wide_results_do_not_colour_cards() -> None:
    results = [
        CheckResult("driver_version", None, Severity.WARNING, "two drivers"),
        CheckResult("temperature", 0, Severity.OK, "fine"),
    ]

    assert card_states(results) == {0: "ok"}
    assert overall(results) is Severity.WARNING
    assert overall([]) is Severity.OK


def test_info_ranks_with_ok_and_never_makes_a_verdict_worse() -> None:
    results = [
        CheckResult("temperature", 0, Severity.INFO, "news"),
        CheckResult("power_cap", 0, Severity.OK, "fine"),
    ]

    assert overall(results) is Severity.OK
    assert card_states(results) == {0: "ok"}
    assert overall([*results, CheckResult("vram", 1, Severity.WARNING, "x")]) is Severity.WARNING
    assert [s.as_event() for s in Severity] == [
        Severity.INFO,
        Severity.INFO,
        Severity.WARNING,
        Severity.CRITICAL,
    ]


def test_check_input_needs_a_sample() -> None:
    with pytest.raises(ValueError, match="at least one sample"):
        CheckInput(samples=[])


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [(1140, "MHz", "1,140 MHz"), (79.9, "C", "79.9 C"), (180.0, "W", "180 W"), (None, "W", "n/a")],
)
def test_numbers_in_messages(value: float | None, unit: str, text: str) -> None:
    assert fmt_num(value, unit) == text
