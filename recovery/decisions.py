"""What the recovery policy can decide: one frozen dataclass per kind of decision.

Executors ``match`` on these; each carries the reason a person reads in the audit trail.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Advice(enum.StrEnum):
    """The host-level step a reboot-required latch asks a person for."""

    WARM_REBOOT = "warm_reboot"
    COLD_POWER_CYCLE = "cold_power_cycle"


ADVICE_TEXT = {
    Advice.WARM_REBOOT: "reboot the host (fleetctl reboot --confirm)",
    Advice.COLD_POWER_CYCLE: (
        "power the rig off for about 30 s, then on (a warm reboot is not enough for "
        "GSP/PMU faults on these cards)"
    ),
}


@dataclass(frozen=True, slots=True)
class Reason:
    """One reason not to start; ``code`` is stable for callers (``reboot_latch`` -> exit 4)."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Start:
    """Start the engine now."""

    reason: str


@dataclass(frozen=True, slots=True)
class RestartAfter:
    """Restart the engine after ``delay_s`` (an application-class failure on a healthy rig)."""

    delay_s: float
    failure_in_a_row: int
    reason: str


@dataclass(frozen=True, slots=True)
class Hold:
    """Too many restarts in the window: keep the engine down until a person acts."""

    reason: str


@dataclass(frozen=True, slots=True)
class Refuse:
    """Do not start; each reason says why."""

    reasons: tuple[Reason, ...]


@dataclass(frozen=True, slots=True)
class StopAndLatch:
    """Stop the engine cleanly and set the reboot-required latch."""

    reason: str
    advice: Advice
    card: int | None = None

    @property
    def advice_text(self) -> str:
        """The exact next step for a person."""
        return ADVICE_TEXT[self.advice]


@dataclass(frozen=True, slots=True)
class AdviseInspection:
    """Record and ask a person to look (an Xid the catalogue does not know, for example)."""

    reason: str
    card: int | None = None


@dataclass(frozen=True, slots=True)
class NoAction:
    """Nothing to do; the reason still goes to the audit trail when it explains a non-move."""

    reason: str


Decision = Start | RestartAfter | Hold | Refuse | StopAndLatch | AdviseInspection | NoAction
