"""Check results grouped by cause: one line per fault naming its cards, the root first."""

from __future__ import annotations

import pytest

from hwcheck.card_ranges import cards_text
from hwcheck.causes import card_tags, group_causes
from hwcheck.model import CheckResult, Severity

CRIT, WARN, OK = Severity.CRITICAL, Severity.WARNING, Severity.OK
B30 = "Kapton tape over pin B30"


def brake(card: int, watts: str) -> CheckResult:
    message = f"card {card} (0000:{card + 1:02x}:00.0): HW power brake active: {watts} W, 1,140 MHz"
    return CheckResult("power_brake", card, CRIT, message, B30)


@pytest.mark.parametrize(
    ("cards", "text"),
    [
        ([2], "card 2"),
        ([0, 1], "cards 0, 1"),
        ([3, 0, 2, 1], "cards 0-3"),
        ([0, 2, 5, 6, 7], "cards 0, 2, 5-7"),
        ([0, 1, 3, 4, 5, 7], "cards 0, 1, 3-5, 7"),
    ],
)
def test_cards_read_as_runs(cards: list[int], text: str) -> None:
    assert cards_text(cards) == text


def test_a_brake_on_every_card_is_one_cause_naming_them() -> None:
    results = [brake(0, "88.1"), brake(1, "86.9"), brake(2, "87.5"), brake(3, "89.0")]
    results.append(CheckResult("power_brake", 4, OK, "card 4: no power brake"))

    (cause,) = group_causes(results)

    assert cause.cards == (0, 1, 2, 3)
    assert cause.headline == "power_brake cards 0-3: HW power brake active: 88.1 W, 1,140 MHz"
    assert cause.remedy == B30 and cause.severity is CRIT
    assert [m.card for m in cause.members] == [0, 1, 2, 3]


def test_a_card_saying_something_else_is_named_in_the_line() -> None:
    other = CheckResult("xid_since_boot", 2, CRIT, "card 2 (0000:41:00.0): 1 Xid: 79", "reboot")
    first = CheckResult("xid_since_boot", 1, CRIT, "card 1 (0000:21:00.0): 2 Xid: 31 x2", "reboot")

    (cause,) = group_causes([first, other])

    assert cause.message == "2 Xid: 31 x2; card 2: 1 Xid: 79"
    assert cause.where == "cards 1, 2"


def test_the_root_cause_leads_and_what_it_explains_says_so() -> None:
    bar1 = [CheckResult("bar1", n, CRIT, f"card {n}: BAR1 256 MiB", "boot it") for n in range(4)]
    p2p = [CheckResult("p2p", n, WARN, f"card {n}: P2P not supported", "boot it") for n in range(4)]
    kernel = CheckResult("host_kernel", None, CRIT, "running kernel 6.8.0-49", "reboot into it")
    brake_warning = CheckResult("temperature", 1, WARN, "card 1: 81 C", "airflow")

    causes = group_causes([*bar1, *p2p, brake_warning, kernel])

    assert [(c.id, c.explained_by) for c in causes] == [
        ("host_kernel", None),
        ("bar1", "host_kernel"),
        ("p2p", "host_kernel"),
        ("temperature", None),
    ]


def test_a_root_on_other_cards_explains_nothing_here() -> None:
    locked = CheckResult("vram_unlocked", 2, CRIT, "card 2: 8,192 MiB", "reload the module")
    module = CheckResult("driver_module", 0, CRIT, "card 0: bound to nouveau", "blacklist it")

    causes = group_causes([locked, module])

    assert [(c.id, c.explained_by) for c in causes] == [
        ("vram_unlocked", None),
        ("driver_module", None),
    ]


def test_rig_wide_results_of_one_check_stay_apart() -> None:
    first = CheckResult("kernel_log", None, WARN, "follower down", "restart")
    second = CheckResult("kernel_log", None, WARN, "records lost", "dmesg")

    assert [c.message for c in group_causes([first, second])] == ["follower down", "records lost"]


def test_unconfirmed_results_are_not_merged_with_confirmed_ones() -> None:
    seen = CheckResult("power_brake", 1, WARN, "card 1: seen once", f"watch it; {B30}", False)
    confirmed = CheckResult("power_brake", 0, WARN, "card 0: seen once", f"watch it; {B30}")

    assert [c.cards for c in group_causes([confirmed, seen])] == [(0,), (1,)]


def test_card_tags_name_the_failing_check_and_the_xid() -> None:
    results = [
        brake(0, "88"),
        CheckResult("vram_unlocked", 1, CRIT, "card 1: 8,192 MiB", "reload"),
        CheckResult("xid_since_boot", 1, CRIT, "card 1: Xid 31", "reboot"),
        CheckResult("memtest", 3, CRIT, "card 3: 37 flipped bits", "replace it"),
        CheckResult("temperature", 0, WARN, "card 0: 82 C", "airflow"),
        CheckResult("power_brake", 2, OK, "card 2: no brake"),
    ]

    tags = card_tags(results, {1: [13, 31, 31]})

    assert tags == {0: ["BRAKE", "HOT"], 1: ["LOCKED", "Xid 31,13"], 3: ["MEMTEST"]}
