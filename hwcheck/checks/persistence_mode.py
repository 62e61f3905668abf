"""``persistence_mode``: the driver should stay loaded between CUDA clients.

Without persistence mode the driver tears the cards down when the last client exits,
which slows every start and drops state; it is a warning, not an incident. A card that
does not report the mode is ``ok`` with "not available": nothing is known to be wrong,
and CMP cards leave many fields unreported. ``[rig] require_persistence_mode = false``
turns "off" into ``ok`` for rigs that run without it on purpose.
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput, card_label
from hwcheck.checks.spec import Alert, CheckSpec, CheckText
from hwcheck.model import CheckResult, Severity

CHECK_ID = "persistence_mode"


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per live card."""
    results: list[CheckResult] = []
    for card in inp.live_cards():
        label = card_label(card)
        if card.persistence_mode is None:
            results.append(
                CheckResult(
                    CHECK_ID, card.index, Severity.OK, f"{label}: persistence mode not available"
                )
            )
        elif card.persistence_mode:
            results.append(
                CheckResult(CHECK_ID, card.index, Severity.OK, f"{label}: persistence mode on")
            )
        elif not inp.profile.require_persistence_mode:
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.OK,
                    f"{label}: persistence mode off (not required by [rig])",
                )
            )
        else:
            results.append(
                CheckResult(
                    CHECK_ID,
                    card.index,
                    Severity.WARNING,
                    f"{label}: persistence mode off",
                    "nvidia-smi -pm 1 (or nvidia-persistenced)",
                )
            )
    return results


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "persistence mode off",
        "Without persistence mode the driver tears the cards down between users, and every "
        "NVML read and engine start pays the initialisation again.",
        "nvidia-smi -pm 1 (or enable nvidia-persistenced).",
    ),
    alert=Alert("PersistenceOff", "Persistence mode off"),
    tag="PERSIST",
)
