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
from collections.abc import Callable, Sequence
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


def _against_median(
    metric: str,
    now: float | None,
    history: Sequence[float],
    min_samples: int,
    firing: Callable[[float, float], bool],
    words: Callable[[float, float, bool], str],
) -> Alarm | None:
    """One alarm: ``None`` without a figure or a median of ``min_samples`` samples."""
    if now is None or len(history) < min_samples:
        return None
    median = statistics.median(history)
    if median <= 0:
        return None
    fires = firing(now, median)
    return Alarm(metric, fires, now, median, words(now, median, fires))


def judge_acceptance(
    now: float | None, history: Sequence[float], share: float, min_samples: int
) -> Alarm | None:
    """The acceptance alarm, or ``None`` when it cannot be judged (no figure, no median)."""
    return _against_median(
        ACCEPTANCE,
        now,
        history,
        min_samples,
        lambda value, median: value < share * median,
        lambda value, median, fires: (
            f"speculative decoding acceptance {value:.0%}, "
            f"{'below' if fires else 'at least'} {share:.0%} of its 24 h median {median:.0%}"
        ),
    )


def judge_ttft(
    now: float | None, history: Sequence[float], factor: float, min_samples: int
) -> Alarm | None:
    """The TTFT p95 alarm, or ``None`` when it cannot be judged."""
    return _against_median(
        TTFT,
        now,
        history,
        min_samples,
        lambda value, median: value > factor * median,
        lambda value, median, _fires: (
            f"time to first token p95 {value:.2f} s, {value / median:.1f}x its 24 h median "
            f"{median:.2f} s"
        ),
    )
