"""Recovery's start and stop paths as the engine wing asks them (``RecoveryRequests``).

The engine service, a profile switch and the gate's answer for the status all go through
recovery's one start path and one stop path; this is the shape they need of it. fleetd's
recovery controller (``daemon.engine.wiring`` hands it in) satisfies it; tests hand fakes.
"""

from __future__ import annotations

from typing import Protocol

from recovery.decisions import Reason
from recovery.facts import Trigger
from recovery.refusals import LastRefusal
from recovery.starts import StartAnswer
from recovery.stops import StopAnswer


class RecoveryRequests(Protocol):
    """Recovery's start and stop paths as a switch (and ``start --stop-foreign``) asks them."""

    def start_refusals(
        self,
        recipe_cards: frozenset[int] | None = None,
        recipe_errors: tuple[str, ...] | None = None,
        held_elsewhere: tuple[Reason, ...] = (),
    ) -> tuple[Reason, ...]:
        """What the start gate refuses now (for this recipe's cards, errors and holders)."""
        ...

    def request_start(self, trigger: Trigger, actor: str, restart: bool) -> StartAnswer:
        """The one start path: one decision, carried out, the answer."""
        ...

    def request_stop(self, trigger: Trigger, actor: str, reason: str = "") -> StopAnswer:
        """The one stop path: one decision, carried out, the answer."""
        ...

    def last_refusal(self) -> LastRefusal | None:
        """The last start refused since the last start."""
        ...
