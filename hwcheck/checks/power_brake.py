"""``power_brake``: a card held in HW power brake (PWRBRK#, PCIe pin B30) runs at a quarter speed.

Some boards assert PWRBRK# on every slot and the cards silently run at about 88 W and
1,140 MHz, a quarter of their throughput. The signature is the brake bit with no
thermal or power-cap cause, held over several samples: only that is critical (one
sample could be a transient). A brake that has a thermal cause is a cooling problem.
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput, card_label, fmt_num
from hwcheck.model import CheckResult, ClockEventReason, GpuSnapshot, Severity

CHECK_ID = "power_brake"

B30_REMEDY = (
    "Kapton tape over PCIe pin B30 on the braked card's slot, or a riser that does not route B30 "
    "(board asserts PWRBRK#)"
)
_THERMAL = ClockEventReason.HW_THERMAL_SLOWDOWN | ClockEventReason.SW_THERMAL_SLOWDOWN


def _readings(card: GpuSnapshot) -> str:
    """``88 W, 1,140 MHz SM``: the two numbers that show a brake."""
    return f"{fmt_num(card.power_draw_w, 'W')}, {fmt_num(card.sm_clock_mhz, 'MHz')} SM"


def _explained(card: GpuSnapshot, label: str) -> CheckResult:
    """A brake that comes with a thermal or power-cap reason."""
    mask = card.clock_event_reasons or 0
    causes = ", ".join(
        name for name in card.clock_event_names if name not in {"hw_power_brake_slowdown"}
    )
    if mask & _THERMAL:
        remedy = "it is thermal: fix cooling (chassis fan speed, airflow over this card)"
    else:
        remedy = "the card is at its power limit: check the cap (fleetctl caps apply) and load"
    return CheckResult(
        CHECK_ID,
        card.index,
        Severity.WARNING,
        f"{label}: HW power brake with a cause ({causes}): {_readings(card)}",
        remedy,
    )


def _judge(inp: CheckInput, card: GpuSnapshot) -> CheckResult:
    """Judge one live card over the sustained-sample window."""
    label = card_label(card)
    needed = max(1, inp.profile.brake_sustained_samples)
    window = inp.history(card.index, needed)
    braked = sum(1 for c in window if c is not None and c.power_brake_unexplained)
    if braked and braked == len(window) == needed:
        return CheckResult(
            CHECK_ID,
            card.index,
            Severity.CRITICAL,
            f"{label}: HW power brake active with no thermal or power cause in {braked} of "
            f"{needed} samples: {_readings(card)} (healthy: about 1,400 MHz)",
            B30_REMEDY,
        )
    if braked:
        return CheckResult(
            CHECK_ID,
            card.index,
            Severity.WARNING,
            f"{label}: HW power brake with no thermal or power cause seen in {braked} of "
            f"{len(window)} sample(s) ({needed} in a row confirm it); now {_readings(card)}",
            f"watch it; if it persists: {B30_REMEDY}",
            confirmed=False,
        )
    if card.power_brake_active:
        return _explained(card, label)
    if card.clock_event_reasons is None:
        return CheckResult(
            CHECK_ID,
            card.index,
            Severity.WARNING,
            f"{label}: clock event reasons not available, the brake cannot be judged; "
            f"{_readings(card)}",
            "check nvidia-smi -q -d PERFORMANCE for 'HW Power Brake Slowdown'",
        )
    return CheckResult(
        CHECK_ID, card.index, Severity.OK, f"{label}: no power brake; {_readings(card)}"
    )


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per live card."""
    return [_judge(inp, card) for card in inp.live_cards()]
