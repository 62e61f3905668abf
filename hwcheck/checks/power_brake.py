"""``power_brake``: a card held in HW power brake (PWRBRK#, PCIe pin B30) runs at a quarter speed.

Some boards assert PWRBRK# on every slot and the cards silently run at about 88 W and
1,140 MHz, a quarter of their throughput. The signature is the brake bit with no
thermal or power-cap cause, held over several samples: only that is critical (one
sample could be a transient). A brake that has a thermal cause is a cooling problem.

NVML defines the brake as asserted from outside the card, "e.g. by the system power
supply": the advice says where the assertion comes from first. Every card braked at once
points at what they share (the board driving PWRBRK# on its slots, or the power supply);
one card alone at its own slot or riser. Only then the B30 fix, and only for a board that
drives the pin: taping an undriven pin gains nothing and risks the contact (seeds).
"""

from __future__ import annotations

from hwcheck.checks import engine_output
from hwcheck.checks.base import CheckInput, card_label, fmt_num
from hwcheck.checks.spec import Alert, CheckSpec, CheckText, DrawnAt
from hwcheck.model import CheckResult, ClockEventReason, GpuSnapshot, Severity

CHECK_ID = "power_brake"

B30_REMEDY = (
    "Kapton tape over PCIe pin B30 on the card's edge, or a riser that does not route B30 "
    "(only where the board drives PWRBRK#: taping an undriven pin gains nothing)"
)
EVERY_CARD_SOURCE = (
    "every card is braked at once, so the assertion comes from what they share: the board "
    "driving PWRBRK# on its slots (e.g. the ASUS Pro WS WRX80E-SAGE), or the power supply "
    "(check its load and rating first)"
)
ONE_CARD_SOURCE = (
    "only this card is braked, so the assertion comes from its own slot or riser: try "
    "another slot or riser"
)


def brake_remedy(every_card: bool) -> str:
    """Where the assertion comes from, then the B30 fix for a board that drives the pin."""
    return f"{EVERY_CARD_SOURCE if every_card else ONE_CARD_SOURCE}; then {B30_REMEDY}"


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


def _judge(inp: CheckInput, card: GpuSnapshot, every_card: bool) -> CheckResult:
    """Judge one live card over the sustained-sample window (``every_card``: all braked)."""
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
            brake_remedy(every_card),
        )
    if braked:
        return CheckResult(
            CHECK_ID,
            card.index,
            Severity.WARNING,
            f"{label}: HW power brake with no thermal or power cause seen in {braked} of "
            f"{len(window)} sample(s) ({needed} in a row confirm it); now {_readings(card)}",
            f"watch it; if it persists: {brake_remedy(every_card)}",
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
    cards = inp.live_cards()
    braked = [card for card in cards if card.power_brake_unexplained]
    every_card = len(cards) > 1 and len(braked) == len(cards)
    return [_judge(inp, card, every_card) for card in cards]


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "HW power brake (PWRBRK#)",
        "Some boards (e.g. ASUS Pro WS WRX80E-SAGE) assert PWRBRK#, PCIe pin B30, on the "
        "slots: every card then runs at about 88 W and 1,140 MHz, a quarter of its "
        "throughput, while nvidia-smi still looks healthy ('HW Power Brake Slowdown: "
        "Active'). It is critical only with no thermal or power-cap cause, held over several "
        "samples; the engine still starts (it is slow, not broken).",
        "first find where the assertion comes from (NVML: from outside the card, 'e.g. by the "
        "system power supply'): every card braked at once, the board's slots or the power "
        "supply; one card, its slot or riser. Then, on a board that drives the pin, Kapton "
        "tape over pin B30 on the card's edge or a riser that does not route B30; taping an "
        "undriven pin gains nothing.",
    ),
    alert=Alert("PowerBrake", "Power brake"),
    tag="BRAKE",
    explains=frozenset({engine_output.CHECK_ID}),
    drawn_at=DrawnAt.CARD_BRAKE,
)
