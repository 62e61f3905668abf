"""``power_cap``: each card's power limit should sit at the profile's cap.

The cap (``nvidia-smi -pl 180``) is lost at every boot and GPU reset, and the cards come
back at their 250 W default; fleetd re-applies it, and this check says when it did not
take. Off target is a warning: the card still works, it just runs hotter and hungrier.
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput, card_label, fmt_num
from hwcheck.checks.spec import Alert, CheckSpec, CheckText, DrawnAt
from hwcheck.model import CheckResult, Severity

CHECK_ID = "power_cap"

APPLY_REMEDY = "`fleetctl caps apply` (caps reset at every boot; fleetd re-applies them)"


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per live card, judged against its own cap (``power_cap_w_by_card``)."""
    tolerance_w = inp.profile.power_cap_tolerance_w
    results: list[CheckResult] = []
    for card in inp.live_cards():
        cap_w = inp.profile.power_cap_for(card.index, card.pci_bus_id)
        target = f"target {fmt_num(cap_w, 'W')} +/- {fmt_num(tolerance_w, 'W')}"
        label = card_label(card)
        limit_w = card.power_limit_w
        if limit_w is None:
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.WARNING,
                    f"{label}: power limit not available ({target})",
                    "check nvidia-smi -q -d POWER for this card",
                )
            )
            continue
        if abs(limit_w - cap_w) <= tolerance_w:
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.OK,
                    f"{label}: power limit {fmt_num(limit_w, 'W')} ({target})",
                )
            )
            continue
        lo, hi = card.power_min_limit_w, card.power_max_limit_w
        remedy = APPLY_REMEDY
        if (lo is not None and cap_w < lo) or (hi is not None and cap_w > hi):
            remedy = (
                f"the cap is outside this card's range {fmt_num(lo, 'W')}..{fmt_num(hi, 'W')}: "
                "set [rig] power_cap_w (or this card's power_cap_w_by_card) within it, then "
                "`fleetctl caps apply`"
            )
        default = ""
        if card.power_default_limit_w is not None and limit_w == card.power_default_limit_w:
            default = " (the card's default: the cap was not applied since boot)"
        results.append(
            CheckResult(
                CHECK_ID,
                card.index,
                Severity.WARNING,
                f"{label}: power limit {fmt_num(limit_w, 'W')}, {target}{default}",
                remedy,
            )
        )
    return results


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "power cap off target",
        "The cap (nvidia-smi -pl, about 180 W on these rigs) is lost at every boot and GPU "
        "reset: the cards come back at their 250 W default and run hotter and hungrier. "
        "fleetd re-applies [rig] power_cap_w (or a card's own power_cap_w_by_card) on its own.",
        "fleetctl caps apply (needs root on the rig); a cap outside the card's range "
        "(100..300 W) is a config mistake.",
    ),
    alert=Alert("PowerCapDrift", "Power cap drifted"),
    tag="CAP",
    drawn_at=DrawnAt.CARD_POWER,
)
