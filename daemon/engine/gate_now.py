"""What the start gate would refuse now, for the status: buttons that cannot succeed are off.

The dashboard enables Start and Restart only when a start can go ahead; the gate (the
latch, a critical gating check on the profile's cards, its lint errors, a diagnostic
holding the cards) says so. One answer is kept for a second: status renders come several
times a second under load, the gate's facts move at the poll's pace. The recipe's lint
(which reads the model's directory: ``config.json``, a listing, a stat of every weight
shard) is kept longer, ``LINT_KEEP_S``, and redone at once when the profile in force
changes: a status render must not touch the model's disk each second. Nothing is decided
here: ``request_start`` still decides each start, with a fresh lint.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from daemon.engine.actions import refusal_document
from daemon.engine.recovery_requests import RecoveryRequests
from recovery.decisions import Reason

KEEP_S = 1.0
LINT_KEEP_S = 30.0

# The profile in force (its name), its cards, its lint errors and what of its files would
# fail the launch (a short checkpoint shard), as the gate reads them.
RecipeFacts = tuple[str, frozenset[int] | None, tuple[str, ...], tuple[Reason, ...]]


class GateNow:
    """The gate's refusals for a start of the profile in force, kept ``KEEP_S``.

    ``recipe_facts()`` gives the profile in force's name, cards and lint errors (it may
    read the model's disk): kept ``LINT_KEEP_S``, or until ``profile()`` names another.
    """

    def __init__(
        self,
        starts: RecoveryRequests,
        profile: Callable[[], str],
        recipe_facts: Callable[[], RecipeFacts],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._starts = starts
        self._profile = profile
        self._recipe_facts = recipe_facts
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: tuple[float, list[dict[str, Any]]] | None = None
        self._facts: tuple[float, RecipeFacts] | None = None

    def blocked(self) -> list[dict[str, Any]]:
        """Each reason a start would be refused now (``RefusalDocument``s); empty: it may."""
        now_s = self._clock()
        with self._lock:
            if self._kept is not None and now_s - self._kept[0] < KEEP_S:
                return self._kept[1]
        _name, cards, errors, blocks = self._facts_now(now_s)
        refusals = self._starts.start_refusals(
            recipe_cards=cards, recipe_errors=errors, held_elsewhere=blocks
        )
        found = [refusal_document(reason) for reason in refusals]
        with self._lock:
            self._kept = (now_s, found)
        return found

    def _facts_now(self, now_s: float) -> RecipeFacts:
        with self._lock:
            kept = self._facts
        if kept is not None and now_s - kept[0] < LINT_KEEP_S and kept[1][0] == self._profile():
            return kept[1]
        facts = self._recipe_facts()
        with self._lock:
            self._facts = (now_s, facts)
        return facts
