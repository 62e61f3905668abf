"""What one canary found: a result word, a figure, a one-line message and advice."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hwcheck.model import Severity

CANARY_NAMES = ("copy_fidelity", "tool_calls", "reasoning_field", "throughput")
# The deep round's canaries (``serving.canary.deep``), shown once they have run.
DEEP_NAMES = ("copy_depth", "recall", "loop", "determinism")


class Outcome(enum.StrEnum):
    """A canary's result (``pass|warn|fail|skipped``; docs/reference.md "Canaries")."""

    PASS = "pass"  # noqa: S105 - a result word, not a password
    WARN = "warn"
    FAIL = "fail"
    SKIPPED = "skipped"

    @property
    def severity(self) -> Severity:
        """The rig severity it maps to (skipped judges nothing: ok)."""
        return {Outcome.WARN: Severity.WARNING, Outcome.FAIL: Severity.CRITICAL}.get(
            self, Severity.OK
        )

    @property
    def exit_code(self) -> int:
        """``fleetctl canary``'s code: 0 pass, 1 warn or skipped (nothing verified), 2 fail."""
        return {Outcome.PASS: 0, Outcome.FAIL: 2}.get(self, 1)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A scorer's judgement, before it is timed and stamped."""

    result: Outcome
    figure: float | None
    message: str
    advice: str = ""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CanaryResult:
    """One canary run: ``{name, result, figure, advice, ts}`` and extras."""

    name: str
    result: Outcome
    figure: float | None
    unit: str
    message: str
    advice: str
    ts: datetime
    duration_s: float
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls, name: str, unit: str, verdict: Verdict, duration_s: float, ts: datetime | None = None
    ) -> CanaryResult:
        """Stamp a verdict with its canary, unit, duration and time."""
        return cls(
            name=name,
            result=verdict.result,
            figure=verdict.figure,
            unit=unit,
            message=verdict.message,
            advice=verdict.advice,
            ts=ts or datetime.now(UTC),
            duration_s=round(duration_s, 3),
            details=dict(verdict.details),
        )

    def as_dict(self) -> dict[str, Any]:
        """The API's shape: the documented keys first, then the extras."""
        return {
            "name": self.name,
            "result": self.result.value,
            "figure": self.figure,
            "advice": self.advice,
            "ts": self.ts.isoformat(),
            "unit": self.unit,
            "message": self.message,
            "duration_s": self.duration_s,
            "details": self.details,
        }


def worst_exit_code(results: list[CanaryResult]) -> int:
    """0 when every canary passed, 2 when one failed, else 1."""
    return max((r.result.exit_code for r in results), default=1)
