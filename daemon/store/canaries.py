"""Engine canary results (one row per canary per round) and log-signature counts per hour.

Each row names the engine it judged: ``engine`` is a side engine's profile (``[serving]
run``), ``None`` the primary engine's, so rows written before engines had canaries of
their own read as the primary's, and each engine's reads see only its own rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, select

from daemon.store.db import Database, check_list_limit, require_aware, upsert
from daemon.store.models import CanaryRun, LogSignatureCount, StoredRow


@dataclass(frozen=True, slots=True)
class CanaryRow(StoredRow):
    """One stored canary result."""

    id: int
    ts: datetime
    name: str
    result: str
    figure: float | None
    unit: str
    message: str
    advice: str
    duration_s: float
    details: dict[str, Any] | None = None
    build_id: int | None = None
    engine: str | None = None


def _of_engine(engine: str | None) -> ColumnElement[bool]:
    """The rows of ``engine`` (``None``: the primary engine's)."""
    return CanaryRun.engine.is_(None) if engine is None else CanaryRun.engine == engine


class CanaryQueries(Database):
    """``Store`` methods for canary results and log-signature counts."""

    def record_canary_results(
        self, results: Sequence[Mapping[str, Any]], engine: str | None = None
    ) -> list[CanaryRow]:
        """Store one round's results (``CanaryResult`` fields by name) of ``engine``."""
        rows: list[CanaryRun] = []
        with self.write() as session:
            for result in results:
                run = CanaryRun(
                    ts=require_aware(result["ts"], "canary time"),
                    name=result["name"],
                    result=result["result"],
                    figure=result.get("figure"),
                    unit=result.get("unit", ""),
                    message=result.get("message", ""),
                    advice=result.get("advice", ""),
                    duration_s=float(result.get("duration_s", 0.0)),
                    details=dict(result.get("details") or {}),
                    build_id=result.get("build_id"),
                    engine=engine,
                )
                session.add(run)
                rows.append(run)
            session.flush()
            return [CanaryRow.from_model(run) for run in rows]

    def latest_canary_results(
        self, judged_only: bool = False, engine: str | None = None
    ) -> dict[str, CanaryRow]:
        """Each canary's newest row of ``engine`` (``judged_only``: the newest not skipped)."""
        newest = select(CanaryRun.name, func.max(CanaryRun.id).label("id"))
        newest = newest.where(_of_engine(engine))
        if judged_only:
            newest = newest.where(CanaryRun.result != "skipped")
        ids = newest.group_by(CanaryRun.name).subquery()
        stmt = select(CanaryRun).join(ids, CanaryRun.id == ids.c.id)
        with self.read() as session:
            return {run.name: CanaryRow.from_model(run) for run in session.execute(stmt).scalars()}

    def list_canary_results(
        self, limit: int = 100, name: str | None = None, engine: str | None = None
    ) -> list[CanaryRow]:
        """``engine``'s canary results newest first."""
        check_list_limit(limit)
        stmt = (
            select(CanaryRun).where(_of_engine(engine)).order_by(CanaryRun.id.desc()).limit(limit)
        )
        if name is not None:
            stmt = stmt.where(CanaryRun.name == name)
        with self.read() as session:
            return [CanaryRow.from_model(run) for run in session.execute(stmt).scalars()]

    def set_log_signature_counts(self, hour: datetime, counts: Mapping[str, int]) -> None:
        """Store the counts of one hour (absolute values: the counter owns the hour)."""
        hour = require_aware(hour, "signature hour")
        with self.write() as session:
            for signature, count in counts.items():
                upsert(
                    session,
                    LogSignatureCount.__table__,  # type: ignore[arg-type]
                    {"hour": hour, "signature": signature, "count": int(count)},
                    ("hour", "signature"),
                )

    def log_signature_counts(self, since: datetime) -> list[tuple[datetime, str, int]]:
        """``(hour, signature, count)`` from ``since`` on, oldest first."""
        stmt = (
            select(LogSignatureCount)
            .where(LogSignatureCount.hour >= require_aware(since, "since"))
            .order_by(LogSignatureCount.hour, LogSignatureCount.signature)
        )
        with self.read() as session:
            return [(row.hour, row.signature, row.count) for row in session.execute(stmt).scalars()]
