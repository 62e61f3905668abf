"""A stop asked of recovery, and its answer: a person's, a profile switch's, the host's, fleetd's.

Stops go through the controller like starts (``RecoveryController.request_stop``): one
``decide`` (a stop is never refused), carried out by the executors, recorded in the audit
trail. They run on their caller's thread and never wait for a start under way (a start
may be reading a slow model directory; a person's stop must not queue behind it): the
supervisor orders the two.
"""

from __future__ import annotations

from dataclasses import dataclass

from recovery.decisions import Decision, NoAction, Stop
from recovery.executors import Outcome


@dataclass(frozen=True, slots=True)
class StopAnswer:
    """The decision a stop request got, and what carrying it out did."""

    decision: Decision
    outcome: Outcome | None = None

    @property
    def stopped(self) -> bool:
        """True when the engine stopped (a person's stop: when it was accepted)."""
        return isinstance(self.decision, Stop) and self.outcome is not None and self.outcome.done

    @property
    def why_not(self) -> str:
        """One line: why the engine did not stop (empty when it did)."""
        if self.stopped:
            return ""
        if isinstance(self.decision, NoAction):
            return self.decision.reason
        return "" if self.outcome is None else self.outcome.message
