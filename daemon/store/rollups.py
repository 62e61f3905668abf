"""1-minute rollups, retention pruning, and the chart query that reads both.

Rolling up is idempotent: a watermark in ``kv`` says up to which minute rollups are
complete, each chunk replaces its minutes (delete, then INSERT ... SELECT ... GROUP BY)
and moves the watermark in the same transaction. Only complete minutes are rolled (a
few seconds of grace for a poll that is still being written). Pruning deletes in short
transactions of at most ``delete_batch`` rows, walking each card's primary key, so a
big backlog never holds the write lock for long.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Table,
    delete,
    func,
    insert,
    literal_column,
    select,
    type_coerce,
)
from sqlalchemy.orm import InstrumentedAttribute, Session

from daemon.store import keyvalue
from daemon.store.db import (
    US_PER_MINUTE,
    Database,
    StoreInputError,
    from_epoch_us,
    require_aware,
    to_epoch_us,
)
from daemon.store.models import Card, EngineSample, Rollup1m, Sample, StoredRow
from daemon.store.samples import card_id_for_uuid
from hwcheck.readings import charted_columns

UnitOfWork = Callable[[], AbstractContextManager[Session]]

DEFAULT_RAW_RETENTION_S = 48 * 3600.0
DEFAULT_ROLLUP_RETENTION_S = 90 * 86400.0
ROLLUP_SETTLE_S = 5.0
ROLLUP_CHUNK_MINUTES = 60
DELETE_BATCH_ROWS = 20_000
RAW_CHART_MAX_SPAN_S = 2 * 3600.0
# The charted readings (``hwcheck.readings``): each has min/avg/max columns on Rollup1m.
METRICS = charted_columns()
_ROLLUPS: Table = Rollup1m.__table__  # type: ignore[assignment]


class ChartResolution(enum.StrEnum):
    """Raw points, 1-minute buckets, or whichever suits the span (``auto``)."""

    AUTO = "auto"
    RAW = "raw"
    MINUTE = "1m"


@dataclass(frozen=True, slots=True)
class MetricStat(StoredRow):
    """Min/avg/max of one metric over a chart point (all equal for a raw point)."""

    min: float
    avg: float
    max: float


@dataclass(frozen=True, slots=True)
class ChartPoint(StoredRow):
    """One point of a card's chart; a metric the card did not report is ``None``."""

    ts: datetime
    n: int
    power_draw_w: MetricStat | None
    temperature_c: MetricStat | None
    sm_clock_mhz: MetricStat | None
    memory_used_mib: MetricStat | None
    utilization_gpu_pct: MetricStat | None = None


@dataclass(frozen=True, slots=True)
class Chart(StoredRow):
    """A card's chart between two times, at the resolution actually used."""

    card_uuid: str
    since: datetime
    until: datetime
    resolution: ChartResolution
    points: list[ChartPoint]


@dataclass(frozen=True, slots=True)
class PruneReport(StoredRow):
    """What one ``rollup_and_prune`` pass did."""

    minutes_rolled: int
    rollup_rows_written: int
    raw_deleted: int
    rollups_deleted: int
    engine_samples_deleted: int
    watermark: datetime | None


def floor_minute_us(value_us: int) -> int:
    """The start of the minute holding ``value_us`` (epoch microseconds)."""
    return value_us // US_PER_MINUTE * US_PER_MINUTE


def _minute_bucket() -> ColumnElement[int]:
    # A literal (not a bound parameter): PostgreSQL matches GROUP BY expressions textually.
    per_minute = literal_column(str(US_PER_MINUTE), BigInteger)
    ts_us = type_coerce(Sample.ts, BigInteger)
    return (ts_us // per_minute) * per_minute


def _stat_columns() -> list[ColumnElement[Any]]:
    columns: list[ColumnElement[Any]] = []
    for metric in METRICS:
        column = getattr(Sample, metric)
        columns += [func.min(column), func.avg(column), func.max(column)]
    return columns


def _card_ids(session: Session) -> list[int]:
    return [int(card_id) for card_id in session.execute(select(Card.id)).scalars()]


def _roll_chunk(session: Session, card_ids: list[int], start_us: int, end_us: int) -> int:
    """Replace the rollups of minutes ``[start_us, end_us)``; rows written.

    The ``card_id IN (...)`` term is what lets both databases walk the ``(card_id, ts)``
    primary key range by range instead of scanning every raw sample.
    """
    start, end = from_epoch_us(start_us), from_epoch_us(end_us)
    session.execute(
        delete(Rollup1m)
        .where(
            Rollup1m.card_id.in_(card_ids),
            Rollup1m.minute >= start,
            Rollup1m.minute < end,
        )
        .execution_options(synchronize_session=False)
    )
    bucket = _minute_bucket()
    source = (
        select(Sample.card_id, bucket, func.count(), *_stat_columns())
        .where(Sample.card_id.in_(card_ids), Sample.ts >= start, Sample.ts < end)
        .group_by(Sample.card_id, bucket)
    )
    targets = ["card_id", "minute", "n"] + [
        f"{metric}_{stat}" for metric in METRICS for stat in ("min", "avg", "max")
    ]
    stmt = insert(_ROLLUPS).from_select(targets, source)
    if session.get_bind().dialect.insert_returning:
        # rowcount of INSERT ... SELECT is not reported by every driver (psycopg: -1).
        return len(session.execute(stmt.returning(_ROLLUPS.c.card_id)).all())
    return max(int(session.execute(stmt).rowcount or 0), 0)  # type: ignore[attr-defined]


def _next_sample_us(session: Session, card_ids: list[int], after_us: int) -> int | None:
    """The first raw sample time at or after ``after_us`` (one PK probe per card)."""
    after = from_epoch_us(after_us)
    found: list[int] = []
    for card_id in card_ids:
        first = session.execute(
            select(func.min(type_coerce(Sample.ts, BigInteger))).where(
                Sample.card_id == card_id, Sample.ts >= after
            )
        ).scalar()
        if first is not None:
            found.append(int(first))
    return min(found, default=None)


def _roll_up(unit: UnitOfWork, complete_before_us: int) -> tuple[int, int, int | None]:
    """Roll every complete minute not yet rolled; (minutes, rows, watermark)."""
    with unit() as session:
        card_ids = _card_ids(session)
        stored = keyvalue.get_value(session, keyvalue.ROLLUP_WATERMARK)
        watermark = None if stored is None else int(stored)
        if watermark is None:
            first = _next_sample_us(session, card_ids, 0)
            if first is None:
                return 0, 0, None
            watermark = floor_minute_us(first)
    minutes = rows = 0
    while watermark < complete_before_us:
        chunk_end = min(watermark + ROLLUP_CHUNK_MINUTES * US_PER_MINUTE, complete_before_us)
        with unit() as session:
            keyvalue.lock_key(session, keyvalue.ROLLUP_WATERMARK)
            written = _roll_chunk(session, card_ids, watermark, chunk_end)
            next_us = chunk_end
            if written == 0:  # a gap (daemon was down): jump to the next sample
                found = _next_sample_us(session, card_ids, chunk_end)
                next_us = (
                    complete_before_us
                    if found is None
                    else max(chunk_end, min(floor_minute_us(found), complete_before_us))
                )
            keyvalue.set_value(session, keyvalue.ROLLUP_WATERMARK, next_us)
        minutes += (chunk_end - watermark) // US_PER_MINUTE
        rows += written
        watermark = next_us
    return minutes, rows, watermark


def _delete_batched(
    unit: UnitOfWork,
    column: InstrumentedAttribute[datetime],
    cutoff: datetime,
    where: list[ColumnElement[bool]],
    batch: int,
) -> int:
    """Delete rows with ``column < cutoff`` (and ``where``) in batches along ``column``."""
    table = column.class_
    deleted = 0
    while True:
        with unit() as session:
            bound = session.execute(
                select(column)
                .where(*where, column < cutoff)
                .order_by(column)
                .offset(batch - 1)
                .limit(1)
            ).scalar_one_or_none()
            upper = column < cutoff if bound is None else column <= bound
            result = session.execute(
                delete(table).where(*where, upper).execution_options(synchronize_session=False)
            )
            deleted += int(result.rowcount or 0)  # type: ignore[attr-defined]
        if bound is None:
            return deleted


def _prune(
    unit: UnitOfWork,
    raw_cutoff: datetime,
    rollup_cutoff: datetime,
    batch: int = DELETE_BATCH_ROWS,
) -> tuple[int, int, int]:
    """Delete raw samples and engine samples before ``raw_cutoff``, rollups before theirs."""
    with unit() as session:
        card_ids = _card_ids(session)
    raw = rollups = 0
    for card_id in card_ids:
        raw += _delete_batched(unit, Sample.ts, raw_cutoff, [Sample.card_id == card_id], batch)
        rollups += _delete_batched(
            unit, Rollup1m.minute, rollup_cutoff, [Rollup1m.card_id == card_id], batch
        )
    engine = _delete_batched(unit, EngineSample.ts, raw_cutoff, [], batch)
    return raw, rollups, engine


def _stat(low: Any, mean: Any, high: Any) -> MetricStat | None:
    if mean is None:
        return None
    return MetricStat(float(low), float(mean), float(high))


def _raw_points(
    session: Session, card_id: int, since: datetime, until: datetime
) -> list[ChartPoint]:
    stmt = (
        select(Sample.ts, *[getattr(Sample, metric) for metric in METRICS])
        .where(Sample.card_id == card_id, Sample.ts >= since, Sample.ts < until)
        .order_by(Sample.ts)
    )
    return [  # a raw point is its own min, avg and max
        _point(row[0], 1, tuple(v for value in row[1:] for v in (value, value, value)))
        for row in session.execute(stmt)
    ]


def _point(ts: datetime, n: int, stats: tuple[Any, ...]) -> ChartPoint:
    """A point from min/avg/max triples, one per metric in ``METRICS``' order."""
    by_metric: dict[str, Any] = {
        metric: _stat(*stats[3 * at : 3 * at + 3]) for at, metric in enumerate(METRICS)
    }
    return ChartPoint(ts=ts, n=int(n), **by_metric)


def _minute_points(
    session: Session, card_id: int, since: datetime, until: datetime
) -> list[ChartPoint]:
    """Stored rollups up to the watermark, then minutes aggregated from raw on the fly."""
    since_us = floor_minute_us(to_epoch_us(since))
    until_us = to_epoch_us(until)
    stored = keyvalue.get_value(session, keyvalue.ROLLUP_WATERMARK)
    watermark_us = since_us if stored is None else max(since_us, min(int(stored), until_us))
    stat_names = [f"{metric}_{stat}" for metric in METRICS for stat in ("min", "avg", "max")]
    rolled = session.execute(
        select(Rollup1m.minute, Rollup1m.n, *[getattr(Rollup1m, name) for name in stat_names])
        .where(
            Rollup1m.card_id == card_id,
            Rollup1m.minute >= from_epoch_us(since_us),
            Rollup1m.minute < from_epoch_us(watermark_us),
        )
        .order_by(Rollup1m.minute)
    )
    points = [_point(row[0], row[1], tuple(row[2:])) for row in rolled]
    if watermark_us < until_us:
        bucket = _minute_bucket()
        fresh = session.execute(
            select(bucket, func.count(), *_stat_columns())
            .where(
                Sample.card_id == card_id,
                Sample.ts >= from_epoch_us(watermark_us),
                Sample.ts < until,
            )
            .group_by(bucket)
            .order_by(bucket)
        )
        points += [_point(from_epoch_us(int(row[0])), row[1], tuple(row[2:])) for row in fresh]
    return points


class RollupQueries(Database):
    """``Store`` methods for rollups, retention and charts."""

    def rollup_and_prune(
        self,
        now: datetime | None = None,
        raw_retention_s: float = DEFAULT_RAW_RETENTION_S,
        rollup_retention_s: float = DEFAULT_ROLLUP_RETENTION_S,
        *,
        delete_batch_rows: int = DELETE_BATCH_ROWS,
    ) -> PruneReport:
        """Roll complete minutes into ``rollups_1m``, then drop what is past its retention.

        Short batched transactions; raw samples not yet rolled up are never pruned,
        whatever the retention says.
        """
        if delete_batch_rows < 1:
            raise StoreInputError(f"delete batch must be at least 1 row, got {delete_batch_rows}")
        if raw_retention_s <= 0 or rollup_retention_s <= 0:
            raise StoreInputError(
                f"retention must be positive: raw {raw_retention_s} s, rollups {rollup_retention_s} s"
            )
        now_us = to_epoch_us(require_aware(now or datetime.now(UTC), "now"))
        complete_before_us = floor_minute_us(now_us - int(ROLLUP_SETTLE_S * 1_000_000))
        minutes, rows, watermark_us = _roll_up(self.write, complete_before_us)
        raw_cutoff_us = now_us - int(raw_retention_s * 1_000_000)
        if watermark_us is not None:
            raw_cutoff_us = min(raw_cutoff_us, watermark_us)
        raw, rollups, engine = _prune(
            self.write,
            from_epoch_us(raw_cutoff_us),
            from_epoch_us(now_us - int(rollup_retention_s * 1_000_000)),
            delete_batch_rows,
        )
        return PruneReport(
            minutes_rolled=minutes,
            rollup_rows_written=rows,
            raw_deleted=raw,
            rollups_deleted=rollups,
            engine_samples_deleted=engine,
            watermark=None if watermark_us is None else from_epoch_us(watermark_us),
        )

    def chart(
        self,
        card_uuid: str,
        since: datetime,
        until: datetime,
        resolution: ChartResolution | str = ChartResolution.AUTO,
    ) -> Chart:
        """A card's chart over ``[since, until)``: raw for short spans, 1-minute otherwise."""
        since = require_aware(since, "since")
        until = require_aware(until, "until")
        if until <= since:
            raise StoreInputError(f"chart span is empty: until {until.isoformat()} <= since")
        try:
            wanted = ChartResolution(resolution)
        except ValueError:
            choices = "|".join(r.value for r in ChartResolution)
            raise StoreInputError(
                f"unknown chart resolution {resolution!r}: expected {choices}"
            ) from None
        if wanted is ChartResolution.AUTO:
            short = until - since <= timedelta(seconds=RAW_CHART_MAX_SPAN_S)
            wanted = ChartResolution.RAW if short else ChartResolution.MINUTE
        with self.read() as session:
            card_id = card_id_for_uuid(session, card_uuid)
            if card_id is None:
                raise StoreInputError(f"unknown card uuid {card_uuid!r}")
            if wanted is ChartResolution.RAW:
                points = _raw_points(session, card_id, since, until)
            else:
                points = _minute_points(session, card_id, since, until)
        return Chart(
            card_uuid=card_uuid, since=since, until=until, resolution=wanted, points=points
        )
