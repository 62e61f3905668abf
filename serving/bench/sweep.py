"""The cap sweep's recommendation: the best tokens per joule within 5% of the best throughput.

A lower cap always wins on tok/J until the card starves; a cap that gives up a fifth of the
throughput for it is not what an owner wants. So among the steps within 5% of the fastest,
the most efficient one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

WITHIN = 0.05


@dataclass(frozen=True, slots=True)
class SweepStep:
    """One cap's measurement."""

    cap_w: float
    decode_tok_s_total: float | None
    tokens_per_joule: float | None
    power_w: float | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)


def recommend(steps: list[SweepStep]) -> SweepStep | None:
    """The recommended step (None when no step measured both figures)."""
    measured = [s for s in steps if s.decode_tok_s_total and s.tokens_per_joule]
    if not measured:
        return None
    fastest = max(s.decode_tok_s_total or 0.0 for s in measured)
    near = [s for s in measured if (s.decode_tok_s_total or 0.0) >= (1 - WITHIN) * fastest]
    return max(near, key=lambda s: (s.tokens_per_joule or 0.0, -s.cap_w))


def parse_sweep(text: str) -> tuple[float, float, float]:
    """``LO:HI:STEP`` in watts; ``ValueError`` with one line when it is not one."""
    parts = text.split(":")
    try:
        low, high, step = (float(p) for p in parts)
    except ValueError:
        raise ValueError(
            f"--cap-sweep {text!r}: expected LO:HI:STEP in watts, e.g. 100:250:25"
        ) from None
    if not (0 < low <= high and step > 0):
        raise ValueError(f"--cap-sweep {text!r}: needs 0 < LO <= HI and STEP > 0")
    if (high - low) / step > 40:
        raise ValueError(f"--cap-sweep {text!r}: more than 40 steps")
    return low, high, step


def sweep_caps(low: float, high: float, step: float) -> list[float]:
    """The caps of ``LO:HI:STEP``, HI included when the steps land on it."""
    caps = []
    value = low
    while value <= high + 1e-9:
        caps.append(round(value, 3))
        value += step
    return caps
