"""card_count (NVML vs PCI bus vs profile) and card_lost."""

from __future__ import annotations

import pytest

from hwcheck.model import RigProfile, Severity
from tests.support.cards import (
    make_card,
    make_input,
    make_lost_card,
    make_rig,
    pci_for,
    result_for,
    results_for,
)

FOUR = [make_card(i) for i in range(4)]


@pytest.mark.parametrize(
    ("nvml_n", "pci_n", "expected", "severity", "words"),
    [
        pytest.param(4, 4, 4, Severity.OK, "NVML sees 4 card(s)", id="all-agree"),
        pytest.param(4, 4, None, Severity.OK, "NVML sees 4", id="no-expectation"),
        pytest.param(3, 4, 4, Severity.CRITICAL, "dropped off NVML", id="dropped-off-nvml"),
        pytest.param(3, 4, None, Severity.CRITICAL, "0000:04:00.0", id="dropped-no-expect"),
        pytest.param(3, 3, 4, Severity.CRITICAL, "1 card(s) missing", id="gone-from-bus"),
        pytest.param(4, 4, 3, Severity.WARNING, "1 more than expected", id="more"),
        pytest.param(4, 0, 4, Severity.OK, "sysfs not readable", id="no-sysfs"),
        pytest.param(0, 0, None, Severity.WARNING, "no cards found", id="nothing"),
        pytest.param(0, 0, 4, Severity.CRITICAL, "4 card(s) missing", id="nothing-expected"),
    ],
)
def test_card_count(
    nvml_n: int, pci_n: int, expected: int | None, severity: Severity, words: str
) -> None:
    inp = make_input(
        [make_rig(FOUR[:nvml_n])],
        pci_devices=pci_for(FOUR[:pci_n]),
        profile=RigProfile(card_count=expected),
    )

    result = result_for(inp, "card_count", None)

    assert result.severity is severity, result.message
    assert words in result.message


def test_dropped_card_remedy_is_reboot_then_riser() -> None:
    inp = make_input([make_rig(FOUR[:3])], pci_devices=pci_for(FOUR))

    result = result_for(inp, "card_count", None)

    assert result.remedy.startswith("reboot; reseat the riser")


def test_card_gone_from_the_bus_points_at_the_hardware() -> None:
    inp = make_input(
        [make_rig(FOUR[:3])], pci_devices=pci_for(FOUR[:3]), profile=RigProfile(card_count=4)
    )

    result = result_for(inp, "card_count", None)

    assert "gone from the PCI bus" in result.remedy


def test_lost_card_is_critical_and_others_answer() -> None:
    cards = [make_card(0), make_lost_card(1, "GPU is lost (NVML 15)"), make_card(2), make_card(3)]
    inp = make_input([make_rig(cards)])

    lost = result_for(inp, "card_lost", 1)

    assert lost.severity is Severity.CRITICAL
    assert lost.message == "card 1 (0000:02:00.0) is lost: GPU is lost (NVML 15)"
    assert "reboot the host" in lost.remedy
    assert "cold power cycle" in lost.remedy
    assert [r.severity for r in results_for(inp, "card_lost") if r.card != 1] == [Severity.OK] * 3


def test_lost_card_readings_are_not_judged_by_other_checks() -> None:
    cards = [make_card(0), make_lost_card(1)]
    inp = make_input([make_rig(cards)])

    for check_id in ("vram_unlocked", "power_brake", "power_cap", "pcie_link", "temperature"):
        assert [r.card for r in results_for(inp, check_id)] == [0], check_id
