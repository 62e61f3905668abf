"""When the engine's own figures are alarming: against their own recent median, not a constant.

Two alarms, each against the median of the last 24 hours of the same figure on this rig:

- speculative decoding's acceptance rate below ``acceptance_alert_share`` (0.6) of its
  median: a DSpark build gone bad (its speedup is gone; the output may be too, as the
  NaN-logit corruption showed);
- time to first token p95 above ``ttft_alert_factor`` (3) times its median: prefill
  slowing (the power brake, a sick card, contexts growing past what the rig serves).

A median needs ``min_samples`` samples that had the figure; before that nothing is
judged (a fresh install has no normal yet). Pure: values in, alarms out.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

ACCEPTANCE = "spec_acceptance"
TTFT = "ttft_p95"


@dataclass(frozen=True, slots=True)
class Alarm:
    """One figure's verdict now: ``firing`` or not, with the figures that made it."""

    metric: str
    firing: bool
    value: float
    median: float
    message: str


def judge_acceptance(
    now: float | None, history: Sequence[float], share: float, min_samples: int
) -> Alarm | None:
    """The acceptance alarm, or ``None`` when it cannot be judged (no figure, no median)."""
    if now is None or len(history) < min_samples:
        return None
    median = statistics.median(history)
    if median <= 0:
        return None
    firing = now < share * median
    message = (
        f"speculative decoding acceptance {now:.0%}, {'below' if firing else 'at least'} "
        f"{share:.0%} of its 24 h median {median:.0%}"
    )
    return Alarm(ACCEPTANCE, firing, now, median, message)


def judge_ttft(
    now: float | None, history: Sequence[float], factor: float, min_samples: int
) -> Alarm | None:
    """The TTFT p95 alarm, or ``None`` when it cannot be judged."""
    if now is None or len(history) < min_samples:
        return None
    median = statistics.median(history)
    if median <= 0:
        return None
    firing = now > factor * median
    message = (
        f"time to first token p95 {now:.2f} s, {now / median:.1f}x its 24 h median {median:.2f} s"
    )
    return Alarm(TTFT, firing, now, median, message)
