"""Engine launches and the audit trail: append-mostly history written in small units.

Launch rows keep the exact argv and environment of each start (secrets masked first),
so ``recipe show --diff`` can compare the next launch with the last one that got ready.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from daemon.store.coltypes import require_aware
from daemon.store.errors import StoreInputError
from daemon.store.events import MAX_LIST_LIMIT
from daemon.store.rows import AuditRow, LaunchRow
from daemon.store.schema import AuditEntry, Launch
from serving.recipe.masking import mask_argv, mask_env


def _launch_row(launch: Launch) -> LaunchRow:
    return LaunchRow(
        id=launch.id,
        started_at=launch.started_at,
        argv=list(launch.argv),
        env=dict(launch.env),
        recipe_hash=launch.recipe_hash,
        ready_at=launch.ready_at,
        ended_at=launch.ended_at,
        exit_code=launch.exit_code,
        crash_class=launch.crash_class,
    )


def record_launch(
    session: Session,
    argv: Sequence[str],
    env: Mapping[str, str],
    recipe_hash: str,
    started_at: datetime | None = None,
) -> int:
    """Store a launch that is starting now; its id (for ``update_launch``)."""
    launch = Launch(
        started_at=require_aware(started_at or datetime.now(UTC), "launch time"),
        argv=mask_argv(argv),
        env=mask_env(env),
        recipe_hash=recipe_hash,
    )
    session.add(launch)
    session.flush()
    return launch.id


def update_launch(
    session: Session,
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
    if not changes:
        return session.get(Launch, launch_id) is not None
    result = session.execute(update(Launch).where(Launch.id == launch_id).values(**changes))
    return bool(result.rowcount)  # type: ignore[attr-defined]


def get_launch(session: Session, launch_id: int) -> LaunchRow | None:
    """One launch by id."""
    launch = session.get(Launch, launch_id)
    return None if launch is None else _launch_row(launch)


def last_ready_launch(session: Session) -> LaunchRow | None:
    """The most recent launch that became ready (what ``recipe show --diff`` compares to)."""
    launch = session.execute(
        select(Launch).where(Launch.ready_at.is_not(None)).order_by(Launch.id.desc()).limit(1)
    ).scalar_one_or_none()
    return None if launch is None else _launch_row(launch)


def list_launches(session: Session, limit: int = 20) -> list[LaunchRow]:
    """The newest launches first."""
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise StoreInputError(f"limit {limit} out of range: expected 1..{MAX_LIST_LIMIT}")
    stmt = select(Launch).order_by(Launch.id.desc()).limit(limit)
    return [_launch_row(launch) for launch in session.execute(stmt).scalars()]


def record_audit(
    session: Session,
    actor: str,
    action: str,
    outcome: str,
    *,
    target: str | None = None,
    reason: str | None = None,
    dry_run: bool = False,
    details: dict[str, Any] | None = None,
    ts: datetime | None = None,
) -> int:
    """Append one audit entry; its id."""
    entry = AuditEntry(
        ts=require_aware(ts or datetime.now(UTC), "audit time"),
        actor=actor,
        action=action,
        target=target,
        reason=reason,
        dry_run=dry_run,
        outcome=outcome,
        details=details,
    )
    session.add(entry)
    session.flush()
    return entry.id


def list_audit(session: Session, since: datetime | None = None, limit: int = 100) -> list[AuditRow]:
    """Audit entries at or after ``since``, newest first."""
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise StoreInputError(f"limit {limit} out of range: expected 1..{MAX_LIST_LIMIT}")
    stmt = select(AuditEntry)
    if since is not None:
        stmt = stmt.where(AuditEntry.ts >= require_aware(since, "since"))
    stmt = stmt.order_by(AuditEntry.ts.desc(), AuditEntry.id.desc()).limit(limit)
    return [
        AuditRow(
            id=entry.id,
            ts=entry.ts,
            actor=entry.actor,
            action=entry.action,
            target=entry.target,
            reason=entry.reason,
            dry_run=entry.dry_run,
            outcome=entry.outcome,
            details=entry.details,
        )
        for entry in session.execute(stmt).scalars()
    ]
