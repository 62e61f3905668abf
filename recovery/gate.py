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
from recovery.decisions import Reason
from recovery.facts import Facts

CLEAR_LATCH = "fleetctl clear-reboot-latch --reason TEXT"
WAY_OUT = {
    Advice.WARM_REBOOT: f"reboot (fleetctl reboot --confirm), or clear the latch ({CLEAR_LATCH})",
    Advice.COLD_POWER_CYCLE: (
        "power-cycle the rig (fleetctl reboot --confirm --cold, or off for about 30 s by hand), "
        f"or clear the latch ({CLEAR_LATCH})"
    ),
}


def _reasons(checks: list[CheckResult]) -> list[Reason]:
    """One reason per cause: a fault on several cards is one line naming them."""
    return [
        Reason(
            "critical_check" if cause.severity is Severity.CRITICAL else "warning_check",
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


def start_gate(facts: Facts) -> tuple[tuple[Reason, ...], tuple[Reason, ...]]:
    """``(refusals, warnings)`` for a start now (no refusal: it may start)."""
    refusals: list[Reason] = []
    warnings: list[Reason] = []
    latch = facts.latch
    if latch is not None:
        refusals.append(
            Reason("reboot_latch", f"reboot required: {latch.reason}", WAY_OUT[latch.advice])
        )
    if facts.cards_held_by is not None:
        refusals.append(
            Reason(
                "cards_busy",
                f"{facts.cards_held_by} has the cards to itself",
                "wait until it ends, then start again",
            )
        )
    refusals.extend(
        Reason("lint", f"recipe: {error}", "fix the recipe (fleetctl recipe lint)")
        for error in facts.recipe_errors
    )
    refusals.extend(facts.held_elsewhere)  # the port or the cards another process holds
    failing = [c for c in facts.checks if c.severity not in (Severity.OK, Severity.INFO)]
    refusals += _reasons([c for c in failing if gates(c, facts)])
    warnings += _reasons([c for c in failing if not gates(c, facts)])
    return tuple(refusals), tuple(warnings)
