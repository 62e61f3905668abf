"""What a card diagnostic is, asks and answers: shared by the procedures, the children and fleetd.

A used CMP 170HX comes from a mining farm with no ECC and no history: the memory test
(``hwcheck.memtest``) checks its HBM; these check the rest a rig owner buys it for (the
link it trained at, every SM's arithmetic, the tensor cores). Every result names the card
and, when it failed, what failed (the SM, the direction, the bit), and a run stopped by
the thermal guard is ``stopped_hot``, never ``passed``: a card that reaches 80 °C core or
85 °C HBM under a test within minutes is itself the finding (PixelML/club-170hx QC
ladder; dev-boz/cmp170hx-testsuite stops at 72/85 °C: docs/domain.md).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class DiagKind(enum.StrEnum):
    """The diagnostics besides the memory test (``fleetctl diag pcie|compute``)."""

    PCIE = "pcie"
    COMPUTE = "compute"


class DiagOutcome(enum.StrEnum):
    """How one card's run ended."""

    PASSED = "passed"
    FAILED = "failed"  # a wrong result or a link below what it trained at
    STOPPED_HOT = "stopped_hot"  # the thermal guard ended it: not a pass
    UNAVAILABLE = "unavailable"  # no driver library (no card here)
    ERROR = "error"  # the driver refused a call: named in ``error``
    TIMED_OUT = "timed_out"  # the card stopped answering: the child was abandoned

    @property
    def failure(self) -> bool:
        """A finding about the card (a bad result, or too hot to finish)."""
        return self in (DiagOutcome.FAILED, DiagOutcome.STOPPED_HOT)


@dataclass(frozen=True)
class ThermalLimits:
    """``[diag] stop_core_c`` and ``stop_hbm_c``: where every diagnostic stops."""

    core_c: float = 80.0
    hbm_c: float = 85.0

    def breach(self, core_c: float | None, hbm_c: float | None) -> str | None:
        """``core 81 °C >= 80 °C`` when a reading reaches its limit; None otherwise.

        HBM reads "not supported" on some boards: then the core alone guards.
        """
        if hbm_c is not None and hbm_c >= self.hbm_c:
            return f"HBM {hbm_c:.0f} °C >= {self.hbm_c:.0f} °C"
        if core_c is not None and core_c >= self.core_c:
            return f"core {core_c:.0f} °C >= {self.core_c:.0f} °C"
        return None


@dataclass(frozen=True)
class DiagPlan:
    """One run's settings (crosses to the child process as JSON)."""

    kind: DiagKind
    seconds: float = 0.0  # compute: how long to keep the SMs busy (0: one round)
    transfer_mib: int = 256  # pcie: each direction's transfer size
    repeats: int = 5  # pcie: transfers per direction; the median counts
    stop_file: str | None = None  # the parent creates it when a card is too hot

    def as_dict(self) -> dict[str, Any]:
        """The JSON form for the child's argv."""
        return {
            "kind": str(self.kind),
            "seconds": self.seconds,
            "transfer_mib": self.transfer_mib,
            "repeats": self.repeats,
            "stop_file": self.stop_file,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DiagPlan:
        """The plan a child was given."""
        return cls(
            DiagKind(data["kind"]),
            float(data.get("seconds", 0.0)),
            int(data.get("transfer_mib", 256)),
            int(data.get("repeats", 5)),
            data.get("stop_file"),
        )


@dataclass
class CardDiag:
    """One card's answer: outcome, a one-line verdict, figures, and what was wrong."""

    card: int
    kind: DiagKind
    outcome: DiagOutcome
    verdict: str = ""
    figures: dict[str, Any] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    error: str | None = None
    alone: bool = False  # pcie: measured with the other cards idle (else all at once)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (API, child output, stored event)."""
        return {
            "card": self.card,
            "kind": str(self.kind),
            "outcome": str(self.outcome),
            "verdict": self.verdict,
            "figures": dict(self.figures),
            "findings": list(self.findings),
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CardDiag:
        """A result read back (from a child's line)."""
        return cls(
            int(data["card"]),
            DiagKind(data["kind"]),
            DiagOutcome(data["outcome"]),
            str(data.get("verdict", "")),
            dict(data.get("figures") or {}),
            [str(item) for item in data.get("findings") or []],
            data.get("error"),
        )

    def line(self) -> str:
        """``card 2 pcie: failed: Gen1 x4: 0.8 GB/s, expected about 1.6 at Gen2 x4 ...``."""
        text = self.verdict or self.error or ""
        return f"card {self.card} {self.kind}: {self.outcome}" + (f": {text}" if text else "")
