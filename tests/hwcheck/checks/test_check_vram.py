"""vram_unlocked: the unlock bands at and around their edges."""

from __future__ import annotations

import pytest

from hwcheck.model import RigProfile, Severity
from tests.support.cards import make_card, make_input, make_rig, result_for


@pytest.mark.parametrize(
    ("total_mib", "device_id", "severity", "words"),
    [
        (65_536, 0x20C2, Severity.OK, "65,536 MiB (unlocked)"),
        (60_000, 0x20C2, Severity.WARNING, "below this rig's baseline of 65,536 MiB"),
        (65_535, 0x20C2, Severity.WARNING, "below this rig's baseline of 65,536 MiB"),
        (59_999, 0x20C2, Severity.WARNING, "59,999 MiB is unexpected"),
        (8_705, 0x20C2, Severity.WARNING, "8,705 MiB is unexpected"),
        (8_704, 0x20C2, Severity.CRITICAL, "8,704 MiB, the stock size"),
        (8_192, 0x20C2, Severity.CRITICAL, "8,192 MiB, the stock size"),
        (7_680, 0x20C2, Severity.CRITICAL, "7,680 MiB, the stock size"),
        (7_679, 0x20C2, Severity.WARNING, "7,679 MiB is unexpected"),
        (40_960, 0x2082, Severity.WARNING, "unexpected but recorded"),
        (40_960, 0x20C2, Severity.WARNING, "40,960 MiB is unexpected"),
        (40_961, 0x2082, Severity.WARNING, "40,961 MiB is unexpected"),
        # The 10de:2082 board's stock ~10 GB is locked too (unlocked it reports 40,960).
        (10_240, 0x2082, Severity.CRITICAL, "10,240 MiB, the stock size of a 10de:2082 board"),
        (9_728, 0x2082, Severity.CRITICAL, "locked (unlocked it reports 40,960 MiB)"),
        (10_752, 0x2082, Severity.CRITICAL, "the stock size of a 10de:2082 board"),
        (10_753, 0x2082, Severity.WARNING, "10,753 MiB is unexpected"),
        (10_240, 0x20C2, Severity.WARNING, "10,240 MiB is unexpected"),
        (8_192, 0x2082, Severity.CRITICAL, "8,192 MiB, the stock size"),
    ],
)
def test_vram_band(total_mib: int, device_id: int, severity: Severity, words: str) -> None:
    cards = [make_card(i) for i in range(4)]
    cards[2] = make_card(2, memory_total_mib=total_mib, pci_device_id=device_id)
    inp = make_input([make_rig(cards)])

    result = result_for(inp, "vram_unlocked", 2)

    assert result.severity is severity
    assert words in result.message
    assert result.message.startswith("card 2 (0000:03:00.0)")
    assert (result.remedy == "") is (severity is Severity.OK)


@pytest.mark.parametrize(
    ("baseline_mib", "total_mib", "device_id", "severity", "words"),
    [
        (60_000, 60_000, 0x20C2, Severity.OK, "60,000 MiB (unlocked)"),
        (60_000, 59_999, 0x20C2, Severity.WARNING, "59,999 MiB is unexpected"),
        (40_960, 40_960, 0x2082, Severity.OK, "this rig's recorded baseline"),
        (40_960, 65_536, 0x20C2, Severity.OK, "65,536 MiB (unlocked)"),
        (
            8_192,
            8_192,
            0x20C2,
            Severity.CRITICAL,
            "the stock size",
        ),  # a locked baseline stays critical
    ],
)
def test_vram_against_the_recorded_baseline(
    baseline_mib: int, total_mib: int, device_id: int, severity: Severity, words: str
) -> None:
    cards = [make_card(i) for i in range(4)]
    cards[2] = make_card(2, memory_total_mib=total_mib, pci_device_id=device_id)
    profile = RigProfile(card_count=4, memory_total_mib=baseline_mib)
    result = result_for(make_input([make_rig(cards)], profile=profile), "vram_unlocked", 2)
    assert result.severity is severity
    assert words in result.message


def test_locked_card_remedy_names_the_module_and_the_reboot() -> None:
    inp = make_input([make_rig([make_card(0, memory_total_mib=8_192)])])

    result = result_for(inp, "vram_unlocked", 0)

    assert result.remedy == (
        "locked at 8192 MiB: the cmpunlocker module is not loaded (a kernel upgrade relocks "
        "cards): rebuild/load it and reboot"
    )


def test_a_locked_2082_board_names_its_unlocked_size() -> None:
    card = make_card(0, memory_total_mib=10_240, pci_device_id=0x2082)
    result = result_for(make_input([make_rig([card])]), "vram_unlocked", 0)
    assert result.severity is Severity.CRITICAL
    assert "unlocked it reports 40,960 MiB" in result.remedy and "cmpunlocker" in result.remedy


def test_missing_memory_size_is_a_warning() -> None:
    inp = make_input([make_rig([make_card(0, memory_total_mib=None)])])

    result = result_for(inp, "vram_unlocked", 0)

    assert result.severity is Severity.WARNING
    assert "not available" in result.message
