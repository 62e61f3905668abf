"""Pure checks: ``CheckInput -> list[CheckResult]``, one module per check id.

The hardware checks judge the rig's samples and host facts; fleetd's own judge its
readings (``hwcheck.checks.readings``) the same way. ``run_checks`` runs them all (ok
results included, so a report lists what passed); ``overall`` and ``card_states``
summarise the results for the status document.
"""

from hwcheck.checks.base import Check, CheckInput
from hwcheck.checks.readings import Readings
from hwcheck.checks.registry import (
    CHECK_IDS,
    CHECKS,
    FLEETD_CHECK_IDS,
    KNOWN_CHECK_IDS,
    card_states,
    overall,
    run_checks,
)
from hwcheck.checks.spec import CheckSpec

__all__ = [
    "CHECKS",
    "CHECK_IDS",
    "FLEETD_CHECK_IDS",
    "KNOWN_CHECK_IDS",
    "Check",
    "CheckInput",
    "CheckSpec",
    "Readings",
    "card_states",
    "overall",
    "run_checks",
]
