"""The audit trail: who did (or, in dry-run, would have done) what, why, and how it went.

Append-only: every recovery decision and operator action adds one entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from daemon.store.db import Database, check_list_limit, require_aware
from daemon.store.models import AuditEntry, StoredRow


@dataclass(frozen=True, slots=True)
class AuditRow(StoredRow):
    """One audit-trail entry."""

    id: int
    ts: datetime
    actor: str
    action: str
    target: str | None
    reason: str | None
    dry_run: bool
    outcome: str
    details: dict[str, Any] | None


class AuditQueries(Database):
    """``Store`` methods for the audit trail."""

    def audit(
        self,
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
        with self.write() as session:
            session.add(entry)
            session.flush()
            return entry.id

    def list_audit(self, since: datetime | None = None, limit: int = 100) -> list[AuditRow]:
        """Audit entries at or after ``since``, newest first."""
        check_list_limit(limit)
        stmt = select(AuditEntry)
        if since is not None:
            stmt = stmt.where(AuditEntry.ts >= require_aware(since, "since"))
        stmt = stmt.order_by(AuditEntry.ts.desc(), AuditEntry.id.desc()).limit(limit)
        with self.read() as session:
            return [AuditRow.from_model(entry) for entry in session.execute(stmt).scalars()]
