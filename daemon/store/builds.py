"""Engine builds: what each launch ran, and the canary verdicts each build earned.

A build row is keyed by the hash of its facts (``serving.runtime.provenance``): seeing
the same facts again moves ``last_seen``; a rebuilt image under the same tag has another
digest, so it is another row. Launches and canary results point at their build
(``build_id``), which is what lets a regression name the last build that passed and the
first that failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update

from daemon.store.db import Database, check_list_limit, require_aware
from daemon.store.models import Build, CanaryRun, Launch, StoredRow


@dataclass(frozen=True, slots=True)
class BuildRow(StoredRow):
    """One engine build as stored."""

    id: int
    build_key: str
    recipe_hash: str
    image: str | None
    image_id: str | None
    image_digest: str | None
    engine_version: str | None
    labels: dict[str, str]
    provenance_output: str | None
    notes: list[str] | None
    first_seen: datetime
    last_seen: datetime
    engine: str | None = None  # a side engine's profile; None: the primary engine


@dataclass(frozen=True, slots=True)
class BuildVerdict:
    """A canary's standing on one build: its newest judged result, and when it first failed.

    ``first_bad_ts`` is the first warn or fail on this build (``None``: never).
    """

    build_id: int
    name: str
    result: str
    figure: float | None
    unit: str
    ts: datetime
    details: dict[str, Any] | None
    first_bad_ts: datetime | None


class BuildQueries(Database):
    """``Store`` methods for engine builds."""

    def record_build(
        self, facts: Mapping[str, Any], seen_at: datetime, engine: str | None = None
    ) -> BuildRow:
        """Store a build's facts (``BuildFacts.as_dict()``), or move its ``last_seen``.

        ``engine``: the side engine's profile that ran it (None: the primary engine).
        """
        seen_at = require_aware(seen_at, "build time")
        key = str(facts["key"])
        with self.write() as session:
            build = session.execute(
                select(Build).where(Build.build_key == key)
            ).scalar_one_or_none()
            if build is None:
                build = Build(
                    build_key=key,
                    recipe_hash=str(facts.get("recipe_hash") or ""),
                    image=facts.get("image"),
                    image_id=facts.get("image_id"),
                    image_digest=facts.get("image_digest"),
                    engine_version=facts.get("engine_version"),
                    labels=dict(facts.get("labels") or {}),
                    provenance_output=facts.get("provenance_output"),
                    notes=list(facts.get("notes") or []) or None,
                    first_seen=seen_at,
                    last_seen=seen_at,
                    engine=engine,
                )
                session.add(build)
            else:
                build.last_seen = max(build.last_seen, seen_at)
            session.flush()
            return BuildRow.from_model(build)

    def touch_build(self, build_id: int, seen_at: datetime) -> None:
        """The build still serves: move its ``last_seen``."""
        seen_at = require_aware(seen_at, "build time")
        with self.write() as session:
            session.execute(
                update(Build)
                .where(Build.id == build_id, Build.last_seen < seen_at)
                .values(last_seen=seen_at)
            )

    def set_launch_build(self, launch_id: int, build_id: int) -> None:
        """Which build a stored launch ran."""
        with self.write() as session:
            session.execute(update(Launch).where(Launch.id == launch_id).values(build_id=build_id))

    def list_builds(self, limit: int = 50, engine: str | None = None) -> list[BuildRow]:
        """One engine's builds (``engine``: a side engine's profile; None: the primary's).

        The most recently seen first. Each engine's builds are its own: the primary's
        regressions, last good build and rollback target never see a side engine's.
        """
        check_list_limit(limit)
        mine = Build.engine.is_(None) if engine is None else Build.engine == engine
        stmt = (
            select(Build).where(mine).order_by(Build.last_seen.desc(), Build.id.desc()).limit(limit)
        )
        with self.read() as session:
            return [BuildRow.from_model(row) for row in session.execute(stmt).scalars()]

    def build_verdicts(self, build_ids: Sequence[int]) -> list[BuildVerdict]:
        """Each canary's newest judged result on each of ``build_ids``, with its first bad time."""
        if not build_ids:
            return []
        ids = list(build_ids)
        judged = CanaryRun.result != "skipped"
        newest = (
            select(func.max(CanaryRun.id).label("id"))
            .where(CanaryRun.build_id.in_(ids), judged)
            .group_by(CanaryRun.build_id, CanaryRun.name)
            .subquery()
        )
        first_bad = (
            select(CanaryRun.build_id, CanaryRun.name, func.min(CanaryRun.ts).label("ts"))
            .where(CanaryRun.build_id.in_(ids), CanaryRun.result.in_(("warn", "fail")))
            .group_by(CanaryRun.build_id, CanaryRun.name)
        )
        with self.read() as session:
            rows = session.execute(
                select(CanaryRun).join(newest, CanaryRun.id == newest.c.id)
            ).scalars()
            latest = list(rows)
            bad = {(b, n): ts for b, n, ts in session.execute(first_bad)}
        return [
            BuildVerdict(
                build_id=int(run.build_id or 0),
                name=run.name,
                result=run.result,
                figure=run.figure,
                unit=run.unit,
                ts=run.ts,
                details=run.details,
                first_bad_ts=bad.get((run.build_id, run.name)),
            )
            for run in latest
        ]
