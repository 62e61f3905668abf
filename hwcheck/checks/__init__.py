"""Pure hardware checks: ``CheckInput -> list[CheckResult]``, one module per check id.

``run_checks`` runs them all (ok results included, so a report lists what passed);
``overall`` and ``card_states`` summarise the results for the status document.
"""

from hwcheck.checks.base import Check, CheckInput
from hwcheck.checks.registry import (
    CHECK_IDS,
    CHECKS,
    RegisteredCheck,
    card_states,
    overall,
    run_checks,
)

__all__ = [
    "CHECKS",
    "CHECK_IDS",
    "Check",
    "CheckInput",
    "RegisteredCheck",
    "card_states",
    "overall",
    "run_checks",
]
