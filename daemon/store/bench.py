"""Bench runs: each ``fleetctl bench`` (a matrix or a cap sweep), its cells as they finish.

A run is inserted when it starts (state ``running``) and updated after every cell, so a
run stopped with Ctrl-C, or cut short by a fleetd that died, keeps the cells it finished.
Runs are listed per build: a verdict compares a run with the earlier runs of its build
and of the builds before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from daemon.store.db import Database, check_list_limit, require_aware
from daemon.store.models import BenchRun, StoredRow


@dataclass(frozen=True, slots=True)
class BenchRow(StoredRow):
    """One bench run as stored."""

    id: int
    kind: str
    state: str
    quick: bool
    actor: str
    build_id: int | None
    build_name: str | None
    started_at: datetime
    finished_at: datetime | None
    method: dict[str, Any]
    cells: list[dict[str, Any]]
    sweep: dict[str, Any] | None
    verdict: dict[str, Any] | None
    error: str | None


class BenchQueries(Database):
    """``Store`` methods for bench runs."""

    def start_bench_run(
        self,
        *,
        kind: str,
        quick: bool,
        actor: str,
        build_id: int | None,
        build_name: str | None,
        method: dict[str, Any],
        started_at: datetime,
    ) -> int:
        """Insert a running run; its id."""
        require_aware(started_at, "started_at")
        with self.write() as session:
            row = BenchRun(
                kind=kind,
                state="running",
                quick=quick,
                actor=actor,
                build_id=build_id,
                build_name=build_name,
                started_at=started_at,
                method=method,
                cells=[],
            )
            session.add(row)
            session.flush()
            return int(row.id)

    def update_bench_run(self, run_id: int, **values: Any) -> None:
        """Set some of a run's columns (``cells``, ``state``, ``verdict``, ``finished_at``...)."""
        with self.write() as session:
            session.execute(update(BenchRun).where(BenchRun.id == run_id).values(**values))

    def get_bench_run(self, run_id: int) -> BenchRow | None:
        """One run, or None."""
        with self.read() as session:
            row = session.get(BenchRun, run_id)
            return None if row is None else BenchRow.from_model(row)

    def list_bench_runs(
        self, limit: int = 50, build_id: int | None = None, kind: str | None = None
    ) -> list[BenchRow]:
        """Runs newest first (of one build, of one kind, when given)."""
        check_list_limit(limit)
        query = select(BenchRun).order_by(BenchRun.id.desc()).limit(limit)
        if build_id is not None:
            query = query.where(BenchRun.build_id == build_id)
        if kind is not None:
            query = query.where(BenchRun.kind == kind)
        with self.read() as session:
            return [BenchRow.from_model(row) for row in session.scalars(query)]

    def end_stale_bench_runs(self, now: datetime) -> int:
        """Runs left ``running`` by a fleetd that died: ``stopped`` (their cells kept)."""
        with self.write() as session:
            result = session.execute(
                update(BenchRun)
                .where(BenchRun.state == "running")
                .values(state="stopped", finished_at=now, error="fleetd stopped during the run")
            )
            return int(getattr(result, "rowcount", 0) or 0)
