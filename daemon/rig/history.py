"""The dashboard's charts over 1 h or 24 h: per card, and the engine's tokens/s.

Per card: power, temperature, SM clock, GPU utilisation and memory used.

Reads the store's chart query (raw samples for 1 h, 1-minute rollups for 24 h) and the
engine samples, and lays them on ONE time grid of fixed buckets, columnar (one list per
series, ``None`` for a gap), because that is what a chart library draws without any
reshaping in the browser, and it bounds the answer (360 or 1,440 points per series)
whatever the poll rate.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from daemon.rig.chart_markers import chart_markers
from daemon.store import Store
from daemon.store.db import StoreError, StoreInputError
from daemon.store.rollups import ChartPoint, ChartResolution
from hwcheck.readings import charted_columns
from serving.errors import InvalidInput, Unavailable

# The charted readings (``hwcheck.readings``), as the store's chart query names them.
CARD_METRICS = charted_columns()


@dataclass(frozen=True, slots=True)
class Span:
    """A chart span: how far back, how wide one bucket is, which store resolution feeds it."""

    length_s: int
    step_s: int
    resolution: ChartResolution


SPANS = {
    "1h": Span(3600, 10, ChartResolution.RAW),
    "24h": Span(86400, 60, ChartResolution.MINUTE),
}

# Bucket start (epoch seconds) -> the values that fell into it.
Buckets = dict[int, list[float]]


def _bucket(ts: datetime, step_s: int) -> int:
    return int(ts.timestamp()) // step_s * step_s


def _card_buckets(points: Iterable[ChartPoint], step_s: int) -> dict[str, Buckets]:
    """Each metric's averages, gathered per bucket."""
    found: dict[str, Buckets] = {metric: defaultdict(list) for metric in CARD_METRICS}
    for point in points:
        start = _bucket(point.ts, step_s)
        for metric in CARD_METRICS:
            stat = getattr(point, metric)
            if stat is not None:
                found[metric][start].append(stat.avg)
    return found


def _points(
    store: Store, uuid: str, since: datetime, until: datetime, span: Span
) -> list[ChartPoint]:
    """A card's chart points; none for a card the store has not written yet (first poll)."""
    try:
        return store.chart(uuid, since, until, span.resolution).points
    except StoreInputError:
        return []


def _column(buckets: Buckets, grid: Sequence[int]) -> list[float | None]:
    """One series on the grid: the bucket's mean, ``None`` where nothing was measured."""
    column: list[float | None] = []
    for start in grid:
        values = buckets.get(start)
        column.append(round(sum(values) / len(values), 2) if values else None)
    return column


# The engine's charted series: throughput and its own figures (``serving.runtime.engine_metrics``).
ENGINE_SERIES = ("tokens_per_s", "ttft_p95_s", "spec_acceptance_ratio", "prefix_cache_hit_ratio")


def history_document(
    store: Store, cards: Sequence[tuple[int, str]], span: str, now: datetime | None = None
) -> dict[str, Any]:
    """The chart data of ``cards`` (``(index, uuid)`` pairs) over ``span`` ("1h" or "24h").

    With the window's Xid, latch and reboot moments (``markers``) for the time axis.
    """
    chosen = SPANS.get(span)
    if chosen is None:
        raise InvalidInput(f"unknown history span {span!r}: one of {', '.join(SPANS)}")
    until = now or datetime.now(UTC)
    since = until - timedelta(seconds=chosen.length_s)
    try:
        per_card = [
            (index, uuid, _card_buckets(_points(store, uuid, since, until, chosen), chosen.step_s))
            for index, uuid in cards
        ]
        engine: dict[str, Buckets] = {name: defaultdict(list) for name in ENGINE_SERIES}
        for sample in store.list_engine_samples(since, until):
            columns = sample.to_columns()
            for name, buckets in engine.items():
                value = columns[name]
                if value is not None:
                    buckets[_bucket(sample.ts, chosen.step_s)].append(value)
        markers = chart_markers(store, since, until)
    except StoreError as exc:
        raise Unavailable(f"history unavailable: {exc}", "store") from None
    starts: set[int] = set()
    for buckets in engine.values():
        starts.update(buckets)
    for _, _, metrics in per_card:
        for buckets in metrics.values():
            starts.update(buckets)
    grid = sorted(starts)
    return {
        "span": span,
        "since": since.isoformat(),
        "until": until.isoformat(),
        "step_s": chosen.step_s,
        "resolution": chosen.resolution.value,
        "ts_s": grid,
        "cards": [
            {
                "card": index,
                "uuid": uuid,
                **{metric: _column(metrics[metric], grid) for metric in CARD_METRICS},
            }
            for index, uuid, metrics in per_card
        ],
        "engine": {name: _column(buckets, grid) for name, buckets in engine.items()},
        "markers": markers,
    }
