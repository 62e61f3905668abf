"""``vram_unlocked``: each card must report its unlocked size.

Bands follow the public unlock checkers (docs/domain.md "VRAM unlock bands"): >= 60,000 MiB
unlocked, 7,680..8,704 MiB stock (locked at 8,192 MiB). The CMP 170HX also ships as a
10de:2082 board, stock at about 10 GB (10,240 MiB) and recorded unlocked at 40,960 MiB: its stock
band (10,240 +/- 512 MiB) is just as locked. Anything else is unexpected. A kernel
upgrade without the cmpunlocker module silently relocks every card, which is why locked
is critical, on both boards.
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput, card_label, fmt_num
from hwcheck.checks.spec import Alert, CheckSpec, CheckText, DrawnAt
from hwcheck.model import CheckResult, Severity

CHECK_ID = "vram_unlocked"

UNLOCKED_MIN_MIB = 60_000
LOCKED_MIN_MIB = 7_680
LOCKED_MAX_MIB = 8_704
RECORDED_2082_MIB = 40_960
DEVICE_ID_2082 = 0x2082
# A 10de:2082 board's stock size (about 10 GB) and the same +/- 512 MiB band as the 20c2's.
STOCK_2082_MIB = 10_240
LOCKED_2082_MIN_MIB = 9_728
LOCKED_2082_MAX_MIB = 10_752

_LOCKED_REMEDY = (
    "locked at 8192 MiB: the cmpunlocker module is not loaded (a kernel upgrade relocks "
    "cards): rebuild/load it and reboot"
)
_LOCKED_2082_REMEDY = (
    "locked at its stock 10,240 MiB (a 10de:2082 board; unlocked it reports 40,960 MiB): the "
    "cmpunlocker module is not loaded (a kernel upgrade relocks cards): rebuild/load it and "
    "reboot"
)
_UNEXPECTED_REMEDY = (
    "compare with nvidia-smi -q and the cmpunlocker version; record the board if it is genuine"
)


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per live card."""
    results: list[CheckResult] = []
    baseline = inp.profile.memory_total_mib
    for card in inp.live_cards():
        label = card_label(card)
        total = card.memory_total_mib
        shown = fmt_num(total, "MiB")
        if total is None:
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.WARNING,
                    f"{label}: memory size not available",
                    "check nvidia-smi -q -d MEMORY for this card",
                )
            )
        elif LOCKED_MIN_MIB <= total <= LOCKED_MAX_MIB:
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.CRITICAL,
                    f"{label}: {shown}, the stock size (unlocked is >= "
                    f"{fmt_num(UNLOCKED_MIN_MIB, 'MiB')})",
                    _LOCKED_REMEDY,
                )
            )
        elif (
            card.pci_device_id == DEVICE_ID_2082
            and LOCKED_2082_MIN_MIB <= total <= LOCKED_2082_MAX_MIB
        ):
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.CRITICAL,
                    f"{label}: {shown}, the stock size of a 10de:2082 board: locked (unlocked "
                    f"it reports {fmt_num(RECORDED_2082_MIB, 'MiB')})",
                    _LOCKED_2082_REMEDY,
                )
            )
        elif total >= UNLOCKED_MIN_MIB and total >= baseline:
            results.append(
                CheckResult(CHECK_ID, card.index, Severity.OK, f"{label}: {shown} (unlocked)")
            )
        elif total == baseline:
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.OK,
                    f"{label}: {shown}, this rig's recorded baseline ([rig] memory_total_mib)",
                )
            )
        elif total >= UNLOCKED_MIN_MIB:
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.WARNING,
                    f"{label}: {shown}, below this rig's baseline of "
                    f"{fmt_num(baseline, 'MiB')} ([rig] memory_total_mib)",
                    "compare with nvidia-smi -q -d MEMORY; re-run fleetctl init if the "
                    "baseline is wrong",
                )
            )
        elif total == RECORDED_2082_MIB and card.pci_device_id == DEVICE_ID_2082:
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.WARNING,
                    f"{label}: {shown} on a 10de:2082 board: its recorded unlocked size, "
                    "below this rig's baseline; unexpected but recorded on such boards",
                    _UNEXPECTED_REMEDY,
                )
            )
        else:
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.WARNING,
                    f"{label}: {shown} is unexpected (unlocked >= "
                    f"{fmt_num(UNLOCKED_MIN_MIB, 'MiB')}, stock 8,192 MiB)",
                    _UNEXPECTED_REMEDY,
                )
            )
    return results


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "VRAM locked",
        "A CMP 170HX reports 8,192 MiB stock and 65,536 MiB with the unlock module. The unlock "
        "is a kernel module: a kernel or driver change without it relocks the card silently, "
        "and the engine then fails to fit its weights or KV cache.",
        "load the unlock module for the running kernel (rebuild it after a kernel upgrade) "
        "and reboot; a card that alone stays locked: reseat it.",
    ),
    alert=Alert("VramRelocked", "VRAM relocked"),
    tag="LOCKED",
    gate=True,
    drawn_at=DrawnAt.CARD_VRAM,
)
