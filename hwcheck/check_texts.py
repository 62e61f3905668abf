"""What each check means on these rigs, and what to do: ``fleetctl explain CHECK_ID``.

A check's result carries one line and one remedy, worded for the card and the moment; the
long text behind them (why it matters on a CMP 170HX rig, what the remedy does, what not
to do) is declared once, in each check's own module (its ``SPEC``), and gathered here
for ``fleetctl explain CHECK_ID`` and for the status document's ``explanations`` of the
checks failing now (``status --verbose``).
docs/domain.md holds the facts these texts rest on.
"""

from __future__ import annotations

from hwcheck.checks.registry import CHECKS
from hwcheck.checks.spec import CheckText

__all__ = ["CHECK_TEXTS", "CheckText"]

# Each check's own (``SPEC.text`` in ``hwcheck/checks/<id>.py``), by id, in report order.
CHECK_TEXTS: dict[str, CheckText] = {spec.id: spec.text for spec in CHECKS}
