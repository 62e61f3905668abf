"""``temperature``: core and HBM temperatures against the profile's limits.

The cards are passive and the chassis fans follow the hottest one, so a hot card is a
cooling problem first. HBM temperature is judged only when the card reports it.
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput, card_label, fmt_num
from hwcheck.checks.spec import Alert, CheckSpec, CheckText, DrawnAt
from hwcheck.model import CheckResult, GpuSnapshot, Severity

CHECK_ID = "temperature"

_REMEDY = "improve cooling: raise chassis fan speed, clear the airflow path over this card"


def _band(value_c: float, warn_c: float, crit_c: float) -> Severity:
    """Severity of one reading: >= crit critical, >= warn warning."""
    if value_c >= crit_c:
        return Severity.CRITICAL
    if value_c >= warn_c:
        return Severity.WARNING
    return Severity.OK


def _judge(inp: CheckInput, card: GpuSnapshot) -> CheckResult:
    """Judge one live card."""
    p = inp.profile
    label = card_label(card)
    if card.temperature_c is None:
        return CheckResult(
            CHECK_ID,
            card.index,
            Severity.WARNING,
            f"{label}: core temperature not available",
            "check nvidia-smi -q -d TEMPERATURE for this card",
        )
    severity = _band(card.temperature_c, p.temperature_warn_c, p.temperature_crit_c)
    parts = [
        f"core {fmt_num(card.temperature_c, 'C')} (warn {fmt_num(p.temperature_warn_c, 'C')}, "
        f"crit {fmt_num(p.temperature_crit_c, 'C')})"
    ]
    if card.memory_temperature_c is not None:
        mem = _band(
            card.memory_temperature_c, p.memory_temperature_warn_c, p.memory_temperature_crit_c
        )
        if mem.rank > severity.rank:
            severity = mem
        parts.append(
            f"HBM {fmt_num(card.memory_temperature_c, 'C')} "
            f"(warn {fmt_num(p.memory_temperature_warn_c, 'C')}, "
            f"crit {fmt_num(p.memory_temperature_crit_c, 'C')})"
        )
    remedy = "" if severity is Severity.OK else _REMEDY
    return CheckResult(CHECK_ID, card.index, severity, f"{label}: {', '.join(parts)}", remedy)


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per live card."""
    return [_judge(inp, card) for card in inp.live_cards()]


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "too hot",
        "Passive cards: the chassis fans must move air over them. Rig owners alert at core "
        "80 C and HBM 85 C; hotter, the card throttles and HBM errors become likelier.",
        "more airflow (fan curve following the hottest card, baffles); check the fans.",
    ),
    alert=Alert("Thermal", "Too hot"),
    tag="HOT",
    gate=True,
    drawn_at=DrawnAt.CARD_TEMPERATURE,
)
