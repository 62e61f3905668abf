"""What the recovery policy can decide: one frozen dataclass per kind of decision.

Executors ``match`` on these; each carries the reason a person reads in the audit trail.
The advice a latch asks for is ``hwcheck.model.Advice`` (the word the latch stores) and
its words come from the one table, ``hwcheck.advice.ADVICE_STEPS``, by the rig's state.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwcheck.advice import ADVICE_STEPS, RigNow
from hwcheck.model import Advice

__all__ = [
    "ADVICE_STEPS",
    "Advice",
    "AdviseInspection",
    "Decision",
    "Hold",
    "NoAction",
    "Reason",
    "Refuse",
    "RestartAfter",
    "Start",
    "Stop",
    "StopAndHold",
    "StopAndLatch",
]


@dataclass(frozen=True, slots=True)
class Reason:
    """One reason not to start (or, with a start, a warning); ``code`` is stable for callers.

    ``reboot_latch`` and every other refusal make fleetctl exit 4; ``remedy`` is what to
    do about it, in words.
    """

    code: str
    message: str
    remedy: str = ""

    @property
    def line(self) -> str:
        """The message and, when known, what to do (one line)."""
        return f"{self.message} (what to do: {self.remedy})" if self.remedy else self.message


@dataclass(frozen=True, slots=True)
class Start:
    """Start the engine now; ``warnings`` are what is wrong but does not refuse a start."""

    reason: str
    warnings: tuple[Reason, ...] = ()


@dataclass(frozen=True, slots=True)
class Stop:
    """Stop the engine cleanly, as asked (a person, a profile switch, the host, fleetd's exit).

    Never refused and never a dry run: a stop is the safe side, and no repair.
    """

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
    """Do not start; each reason says why and what to do."""

    reasons: tuple[Reason, ...]

    @property
    def line(self) -> str:
        """Every reason on one line."""
        return "; ".join(reason.line for reason in self.reasons)

    @property
    def headline(self) -> str:
        """Every reason's message, without what to do (the audit trail's short reason)."""
        return "; ".join(reason.message for reason in self.reasons)


@dataclass(frozen=True, slots=True)
class StopAndLatch:
    """Stop the engine cleanly and set the reboot-required latch.

    ``what`` is the fault's short name, without the card ("Xid 79 (GPU has fallen off
    the bus)", "NVML: GPU is lost", "CUDA probe failed"): the card's fault history keeps
    it, so it is carried from where the fault was found, never parsed back from ``reason``.
    """

    reason: str
    advice: Advice
    card: int | None = None
    what: str = ""

    def advice_text(self, engine_running: bool) -> str:
        """The exact next step for a person, once the latch is set."""
        now = RigNow(engine_running, latched=True, latch_advice=self.advice, latch_card=self.card)
        return ADVICE_STEPS[self.advice].text(now)


@dataclass(frozen=True, slots=True)
class StopAndHold:
    """Stop the engine cleanly and keep it down until a person starts it (no latch).

    A failing canary round with ``on_fail = "hold"``, or one whose restarts the breaker
    stopped: the engine answers, but what it says is garbage.
    """

    reason: str


@dataclass(frozen=True, slots=True)
class AdviseInspection:
    """Record and ask a person to look (an Xid the catalogue does not know, for example)."""

    reason: str
    card: int | None = None


@dataclass(frozen=True, slots=True)
class NoAction:
    """Nothing to do; the reason still goes to the audit trail when it explains a non-move."""

    reason: str


Decision = (
    Start
    | Stop
    | RestartAfter
    | Hold
    | Refuse
    | StopAndLatch
    | StopAndHold
    | AdviseInspection
    | NoAction
)
