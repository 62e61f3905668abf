"""Engine launches: exactly what ran (secrets masked) and how it ended.

Launch rows keep the argv and environment of each start, so ``recipe show --diff`` can
compare the next launch with the last one that got ready.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update

from daemon.store.db import Database, check_list_limit, require_aware
from daemon.store.models import Launch, StoredRow
from serving.recipe.masking import mask_argv, mask_env


@dataclass(frozen=True, slots=True)
class LaunchRow(StoredRow):
    """One engine launch as stored (environment secrets already masked)."""

    id: int
    started_at: datetime
    argv: list[str]
    env: dict[str, str]
    recipe_hash: str
    ready_at: datetime | None = None
    ended_at: datetime | None = None
    exit_code: int | None = None
    crash_class: str | None = None
    build_id: int | None = None
    engine: str | None = None  # a side engine's profile; None: the primary


def _of_engine(engine: str | None) -> Any:
    """The launches of one engine: the primary's (``None``) or a side engine's."""
    return Launch.engine.is_(None) if engine is None else Launch.engine == engine


class LaunchQueries(Database):
    """``Store`` methods for engine launches."""

    def record_launch(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        recipe_hash: str,
        started_at: datetime | None = None,
        engine: str | None = None,
    ) -> int:
        """Store a launch that is starting now (secrets masked); its id for ``update_launch``.

        ``engine``: a side engine's profile (``None``: the primary), so each engine's diff,
        adoption and crash evidence compare it with its own launches only.
        """
        launch = Launch(
            started_at=require_aware(started_at or datetime.now(UTC), "launch time"),
            argv=mask_argv(argv),
            env=mask_env(env),
            recipe_hash=recipe_hash,
            engine=engine,
        )
        with self.write() as session:
            session.add(launch)
            session.flush()
            return launch.id

    def update_launch(
        self,
        launch_id: int,
        *,
        ready_at: datetime | None = None,
        ended_at: datetime | None = None,
        exit_code: int | None = None,
        crash_class: str | None = None,
    ) -> bool:
        """Set whichever of the given fields are not ``None``; False for an unknown id."""
        changes: dict[str, Any] = {}
        if ready_at is not None:
            changes["ready_at"] = require_aware(ready_at, "ready time")
        if ended_at is not None:
            changes["ended_at"] = require_aware(ended_at, "end time")
        if exit_code is not None:
            changes["exit_code"] = exit_code
        if crash_class is not None:
            changes["crash_class"] = crash_class
        with self.write() as session:
            if not changes:
                return session.get(Launch, launch_id) is not None
            result = session.execute(update(Launch).where(Launch.id == launch_id).values(**changes))
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def get_launch(self, launch_id: int) -> LaunchRow | None:
        """One launch by id."""
        with self.read() as session:
            launch = session.get(Launch, launch_id)
            return None if launch is None else LaunchRow.from_model(launch)

    def last_ready_launch(self, engine: str | None = None) -> LaunchRow | None:
        """The engine's most recent launch that reached ready (``engine``: as in ``record_launch``).

        What ``recipe show --diff`` and the crash evidence compare the next launch with.
        """
        stmt = (
            select(Launch)
            .where(Launch.ready_at.is_not(None), _of_engine(engine))
            .order_by(Launch.id.desc())
        )
        with self.read() as session:
            launch = session.execute(stmt.limit(1)).scalar_one_or_none()
            return None if launch is None else LaunchRow.from_model(launch)

    def list_launches(self, limit: int = 20, engine: str | None = None) -> list[LaunchRow]:
        """The engine's newest launches first (``engine`` as in ``record_launch``)."""
        check_list_limit(limit)
        stmt = select(Launch).where(_of_engine(engine)).order_by(Launch.id.desc()).limit(limit)
        with self.read() as session:
            return [LaunchRow.from_model(launch) for launch in session.execute(stmt).scalars()]
