"""power_brake (sustained, explained or not) and power_cap (target and tolerance)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hwcheck.checks.power_brake import B30_REMEDY, brake_remedy
from hwcheck.model import ClockEventReason, GpuSnapshot, RigProfile, Severity
from tests.support.cards import (
    BRAKE_ONLY,
    make_braked_card,
    make_card,
    make_input,
    make_rig,
    make_samples,
    result_for,
    results_for,
)

HEALTHY = make_card(0)
BRAKED = make_braked_card(0)


@pytest.mark.parametrize(
    ("history", "severity"),
    [
        pytest.param([BRAKED, BRAKED, BRAKED], Severity.CRITICAL, id="3-of-3"),
        pytest.param([HEALTHY, BRAKED, BRAKED, BRAKED], Severity.CRITICAL, id="last-3-of-4"),
        pytest.param([HEALTHY, BRAKED, BRAKED], Severity.WARNING, id="2-of-3-now"),
        pytest.param([BRAKED, BRAKED, HEALTHY], Severity.WARNING, id="2-of-3-cleared"),
        pytest.param([BRAKED, HEALTHY, BRAKED], Severity.WARNING, id="intermittent"),
        pytest.param([BRAKED], Severity.WARNING, id="seen-once"),
        pytest.param([BRAKED, BRAKED], Severity.WARNING, id="2-samples-only"),
        pytest.param([BRAKED, HEALTHY, HEALTHY, HEALTHY], Severity.OK, id="outside-window"),
        pytest.param([HEALTHY, HEALTHY, HEALTHY], Severity.OK, id="never"),
    ],
)
def test_unexplained_brake_must_be_sustained(
    history: list[GpuSnapshot], severity: Severity
) -> None:
    inp = make_input(make_samples(*[[card] for card in history]), profile=RigProfile())

    result = result_for(inp, "power_brake", 0)

    assert result.severity is severity, result.message


def test_sustained_brake_message_has_watts_and_megahertz_and_b30_remedy() -> None:
    inp = make_input(make_samples([BRAKED], [BRAKED], [BRAKED]))

    result = result_for(inp, "power_brake", 0)

    assert "3 of 3 samples" in result.message
    assert "88 W" in result.message
    assert "1,140 MHz" in result.message
    assert result.remedy == brake_remedy(every_card=False)
    assert result.remedy.endswith(B30_REMEDY)


def test_the_brake_advice_says_where_the_assertion_comes_from_first() -> None:
    """NVML: asserted from outside, "e.g. by the system power supply"; seeds: B30 on boards
    that drive it, and taping an undriven pin gains nothing."""
    every = [make_braked_card(i) for i in range(4)]
    inp = make_input(make_samples(every, every, every))
    remedies = {result_for(inp, "power_brake", card).remedy for card in range(4)}
    (remedy,) = remedies
    assert remedy.startswith("every card is braked at once")
    assert "the board driving PWRBRK#" in remedy and "power supply" in remedy
    assert remedy.index("power supply") < remedy.index("Kapton tape over PCIe pin B30")
    assert "taping an undriven pin gains nothing" in remedy
    one = [make_braked_card(0), make_card(1), make_card(2), make_card(3)]
    single = result_for(make_input(make_samples(one, one, one)), "power_brake", 0)
    assert single.remedy.startswith("only this card is braked")
    assert "its own slot or riser" in single.remedy
    assert single.remedy.index("riser") < single.remedy.index("Kapton tape")


def test_a_single_sample_is_enough_when_the_profile_says_so() -> None:
    inp = make_input(make_samples([BRAKED]), profile=RigProfile(brake_sustained_samples=1))

    assert result_for(inp, "power_brake", 0).severity is Severity.CRITICAL


def test_brake_seen_once_says_it_is_confirming() -> None:
    inp = make_input(make_samples([BRAKED]))

    result = result_for(inp, "power_brake", 0)

    assert "1 of 1 sample(s)" in result.message
    assert "3 in a row confirm it" in result.message
    assert result.confirmed is False  # shown, but not alerted until confirmed


def test_only_the_unconfirmed_brake_is_unconfirmed() -> None:
    confirmed = make_input(make_samples([BRAKED], [BRAKED], [BRAKED]))
    assert result_for(confirmed, "power_brake", 0).confirmed is True
    thermal = make_input(make_samples([replace(BRAKED, clock_event_reasons=0x80 | 0x40)]))
    assert result_for(thermal, "power_brake", 0).confirmed is True  # a cooling problem now


@pytest.mark.parametrize(
    ("cause", "remedy_words"),
    [
        (ClockEventReason.HW_THERMAL_SLOWDOWN, "thermal: fix cooling"),
        (ClockEventReason.SW_THERMAL_SLOWDOWN, "thermal: fix cooling"),
        (ClockEventReason.SW_POWER_CAP, "power limit"),
    ],
)
def test_brake_with_a_cause_is_a_warning_even_when_sustained(
    cause: ClockEventReason, remedy_words: str
) -> None:
    explained = make_braked_card(0, clock_event_reasons=BRAKE_ONLY | int(cause))
    inp = make_input(make_samples([explained], [explained], [explained]))

    result = result_for(inp, "power_brake", 0)

    assert result.severity is Severity.WARNING
    assert str(cause.name).lower() in result.message
    assert remedy_words in result.remedy


def test_only_the_braked_card_is_flagged() -> None:
    poll = [make_card(0), make_braked_card(1), make_card(2), make_card(3)]
    inp = make_input(make_samples(poll, poll, poll))

    severities = {r.card: r.severity for r in results_for(inp, "power_brake")}

    assert severities == {
        0: Severity.OK,
        1: Severity.CRITICAL,
        2: Severity.OK,
        3: Severity.OK,
    }


def test_unknown_clock_reasons_are_a_warning() -> None:
    inp = make_input([make_rig([make_card(0, clock_event_reasons=None)])])

    result = result_for(inp, "power_brake", 0)

    assert result.severity is Severity.WARNING
    assert "not available" in result.message


@pytest.mark.parametrize(
    ("limit_w", "severity"),
    [
        (177.9, Severity.WARNING),
        (178.0, Severity.OK),
        (180.0, Severity.OK),
        (182.0, Severity.OK),
        (182.1, Severity.WARNING),
        (250.0, Severity.WARNING),
    ],
)
def test_power_cap_tolerance(limit_w: float, severity: Severity) -> None:
    profile = RigProfile(power_cap_w=180.0, power_cap_tolerance_w=2.0)
    inp = make_input([make_rig([make_card(0, power_limit_w=limit_w)])], profile=profile)

    result = result_for(inp, "power_cap", 0)

    assert result.severity is severity
    assert f"{limit_w:g} W" in result.message
    assert "target 180 W +/- 2 W" in result.message
    if severity is Severity.WARNING:
        assert "fleetctl caps apply" in result.remedy


def test_default_limit_after_boot_is_named() -> None:
    inp = make_input([make_rig([make_card(0, power_limit_w=250.0)])])

    result = result_for(inp, "power_cap", 0)

    assert "the card's default" in result.message


def test_cap_outside_the_card_range_asks_to_fix_the_config() -> None:
    profile = RigProfile(power_cap_w=90.0)
    inp = make_input([make_rig([make_card(0, power_limit_w=180.0)])], profile=profile)

    result = result_for(inp, "power_cap", 0)

    assert result.severity is Severity.WARNING
    assert "outside this card's range 100 W..300 W" in result.remedy


def test_power_limit_not_available() -> None:
    inp = make_input([make_rig([make_card(0, power_limit_w=None)])])

    result = result_for(inp, "power_cap", 0)

    assert result.severity is Severity.WARNING
    assert "not available" in result.message


# -- per-card caps: a real owner's rig runs 175 W at boot, 180 W on cards 0-3 after a wedge


def test_each_card_is_judged_against_its_own_cap() -> None:
    profile = RigProfile(
        power_cap_w=175.0, power_cap_w_by_card={"0-3": 180.0, "0000:06:00.0": 160.0}
    )
    limits = {0: 180.0, 3: 180.0, 4: 175.0, 5: 160.0, 6: 180.0}
    cards = [make_card(index, power_limit_w=watts) for index, watts in limits.items()]
    inp = make_input([make_rig(cards)], profile=profile)

    verdicts = {r.card: r.severity for r in results_for(inp, "power_cap")}

    assert verdicts == {0: Severity.OK, 3: Severity.OK, 4: Severity.OK, 5: Severity.OK,
                        6: Severity.WARNING}  # fmt: skip
    assert "target 175 W" in result_for(inp, "power_cap", 6).message  # card 6: the rig's cap


@pytest.mark.parametrize(
    ("index", "address", "cap_w"),
    [
        (0, "0000:01:00.0", 180.0),  # in the run 0-3
        (2, "0000:21:00.0", 170.0),  # its address wins over the run
        (3, "0000:31:00.0", 165.0),  # its index wins over the run
        (4, "0000:41:00.0", 175.0),  # none of its own: the rig's
    ],
)
def test_a_cards_cap_address_then_index_then_run_then_the_rigs(
    index: int, address: str, cap_w: float
) -> None:
    profile = RigProfile(
        power_cap_w=175.0,
        power_cap_w_by_card={"0-3": 180.0, "0000:21:00.0": 170.0, "3": 165.0},
    )
    assert profile.power_cap_for(index, address) == cap_w


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("card1", "is not a card"),
        ("3-1", "goes backwards"),
        ("00:21.0.0.0", "is not a card"),
    ],
)
def test_a_per_card_cap_key_that_is_no_card_is_refused(key: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        RigProfile(power_cap_w_by_card={key: 180.0})


def test_per_card_addresses_are_kept_in_the_one_form() -> None:
    profile = RigProfile(power_cap_w_by_card={"0000:21:00.0": 170.0, "00000000:41:00.0": 160.0})
    assert set(profile.power_cap_w_by_card) == {"0000:21:00.0", "0000:41:00.0"}
