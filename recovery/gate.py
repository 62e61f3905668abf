"""The start gate: what refuses a start, and what only warns. Pure, no I/O.

Every start (a person's, autostart's, the bring-up's, the end of a backoff) passes it.
It refuses on what makes a start unsafe: the reboot-required latch (always), a diagnostic
that has the cards to itself (the memory test), the recipe's lint errors, the recipe's
port or cards held by another process (when the caller gathered them: a switch, before
it stops the engine that serves), and a critical
result of a check listed in ``[recovery] gate_checks`` on a card the recipe uses (or on
the whole rig, ``card=None``). Everything else that is not ok
(the power brake, a cap off target, a warm card, foreign processes, critical results on
cards the recipe does not use...) is a warning that goes with the start, written into
its audit and returned to the caller: a speed or hygiene problem must not keep a rig
from serving.
"""

from __future__ import annotations

from hwcheck.causes import group_causes
from hwcheck.model import Advice, CheckResult, Severity
from recovery.actions import RefusalCode
from recovery.decisions import Reason
from recovery.facts import Facts

CLEAR_LATCH = "fleetctl clear-reboot-latch --reason TEXT"
WAY_OUT = {
    Advice.WARM_REBOOT: f"reboot (fleetctl reboot --confirm), or clear the latch ({CLEAR_LATCH})",
    Advice.COLD_POWER_CYCLE: (
        "power-cycle the rig (fleetctl reboot --confirm --cold, or off for about 30 s by hand), "
        f"or clear the latch ({CLEAR_LATCH})"
    ),
    Advice.TAKE_CARD_OUT: (
        f"clear the latch ({CLEAR_LATCH}) and serve a profile without the card (fleetctl serve "
        "PROFILE), or reseat or replace the card with the rig powered off"
    ),
}


def _reasons(checks: list[CheckResult]) -> list[Reason]:
    """One reason per cause: a fault on several cards is one line naming them."""
    return [
        Reason(
            RefusalCode.CRITICAL_CHECK
            if cause.severity is Severity.CRITICAL
            else RefusalCode.WARNING_CHECK,
            f"{cause.id} ({cause.where}): {cause.message}"
            if cause.cards
            else f"{cause.id}: {cause.message}",
            cause.remedy,
        )
        for cause in group_causes(checks)
    ]


def gates(check: CheckResult, facts: Facts) -> bool:
    """True when ``check`` refuses a start under these facts."""
    if check.severity is not Severity.CRITICAL:
        return False
    if check.id not in facts.settings.gate_checks:
        return False
    cards = facts.recipe_cards
    return check.card is None or cards is None or check.card in cards


def concerns(check: CheckResult, facts: Facts) -> bool:
    """False for a result on a card only another engine of this rig uses (its warning)."""
    cards = facts.recipe_cards
    if check.card is None or check.card not in facts.others_cards:
        return True
    return cards is not None and check.card in cards


def start_gate(facts: Facts) -> tuple[tuple[Reason, ...], tuple[Reason, ...]]:
    """``(refusals, warnings)`` for a start now (no refusal: it may start)."""
    refusals: list[Reason] = []
    warnings: list[Reason] = []
    latch = facts.latch
    if latch is not None:
        refusals.append(
            Reason(
                RefusalCode.REBOOT_LATCH, f"reboot required: {latch.reason}", WAY_OUT[latch.advice]
            )
        )
    if facts.cards_held_by is not None:
        refusals.append(
            Reason(
                RefusalCode.CARDS_BUSY,
                f"{facts.cards_held_by} has the cards to itself",
                "wait until it ends, then start again",
            )
        )
    refusals.extend(
        Reason(RefusalCode.LINT, f"recipe: {error}", "fix the recipe (fleetctl recipe lint)")
        for error in facts.recipe_errors
    )
    refusals.extend(facts.recipe_blocks)  # a checkpoint shard missing or short
    refusals.extend(facts.held_elsewhere)  # the port or the cards another process holds
    failing = [c for c in facts.checks if c.severity not in (Severity.OK, Severity.INFO)]
    refusals += _reasons([c for c in failing if gates(c, facts)])
    warnings += _reasons([c for c in failing if not gates(c, facts) and concerns(c, facts)])
    return tuple(refusals), tuple(warnings)
