"""The alert outbox as senders and readers use it: next in line, delivered, failed, listed.

A sink's notifications leave strictly in ``id`` order: ``next_notification`` always
answers the oldest one neither delivered nor given up, so a sink that is down holds its
queue and gets all of it, in order, once it answers again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import func, select, update

from daemon.store.alerts import FIRING, RESOLVED, AlertRow, NotificationRow
from daemon.store.db import Database, StoreInputError, check_list_limit, require_aware
from daemon.store.models import Alert, AlertNotification

MAX_ERROR_CHARS = 300


class OutboxQueries(Database):
    """``Store`` methods for delivering and listing alerts."""

    def next_notification(self, sink: str) -> NotificationRow | None:
        """The oldest notification ``sink`` still has to get, or ``None``."""
        stmt = (
            select(AlertNotification)
            .where(
                AlertNotification.sink == sink,
                AlertNotification.delivered_at.is_(None),
                AlertNotification.gave_up_at.is_(None),
            )
            .order_by(AlertNotification.id)
            .limit(1)
        )
        with self.read() as session:
            row = session.execute(stmt).scalar_one_or_none()
            return None if row is None else NotificationRow.from_model(row)

    def _update_notification(self, notification_id: int, **values: object) -> None:
        with self.write() as session:
            session.execute(
                update(AlertNotification)
                .where(AlertNotification.id == notification_id)
                .values(**values)
            )

    def notification_delivered(self, notification_id: int, now: datetime | None = None) -> None:
        """The sink answered 2xx: never send this one again."""
        ts = require_aware(now or datetime.now(UTC), "delivery time")
        self._update_notification(
            notification_id,
            delivered_at=ts,
            last_try_at=ts,
            attempts=AlertNotification.attempts + 1,
            last_error=None,
        )

    def notification_failed(
        self, notification_id: int, error: str, now: datetime | None = None
    ) -> None:
        """One try failed (``error``: one line, already free of secrets); it stays queued."""
        ts = require_aware(now or datetime.now(UTC), "delivery time")
        self._update_notification(
            notification_id,
            last_try_at=ts,
            attempts=AlertNotification.attempts + 1,
            last_error=error[:MAX_ERROR_CHARS],
        )

    def notification_given_up(
        self, notification_id: int, reason: str, now: datetime | None = None
    ) -> None:
        """Too old to be worth sending: take it out of the queue, saying why."""
        ts = require_aware(now or datetime.now(UTC), "delivery time")
        self._update_notification(
            notification_id, gave_up_at=ts, last_error=reason[:MAX_ERROR_CHARS]
        )

    def list_alerts(self, limit: int = 50, status: str | None = None) -> list[AlertRow]:
        """Alerts newest first; ``status``: ``firing`` or ``resolved``."""
        check_list_limit(limit)
        stmt = select(Alert)
        if status is not None:
            if status not in (FIRING, RESOLVED):
                raise StoreInputError(f"unknown alert status {status!r}: expected firing|resolved")
            stmt = stmt.where(Alert.status == status)
        stmt = stmt.order_by(Alert.id.desc()).limit(limit)
        with self.read() as session:
            return [AlertRow.from_model(row) for row in session.execute(stmt).scalars()]

    def get_alert(self, alert_id: int) -> AlertRow | None:
        """One alert by id."""
        with self.read() as session:
            row = session.get(Alert, alert_id)
            return None if row is None else AlertRow.from_model(row)

    def notifications_of(self, alert_ids: Sequence[int]) -> list[NotificationRow]:
        """Every notification of these alerts, oldest first."""
        if not alert_ids:
            return []
        stmt = (
            select(AlertNotification)
            .where(AlertNotification.alert_id.in_(list(alert_ids)))
            .order_by(AlertNotification.id)
        )
        with self.read() as session:
            return [NotificationRow.from_model(row) for row in session.execute(stmt).scalars()]

    def outbox_pending(self) -> dict[str, int]:
        """Per sink, how many notifications still wait for delivery."""
        stmt = (
            select(AlertNotification.sink, func.count())
            .where(AlertNotification.delivered_at.is_(None), AlertNotification.gave_up_at.is_(None))
            .group_by(AlertNotification.sink)
        )
        with self.read() as session:
            return {str(sink): int(n) for sink, n in session.execute(stmt).all()}

    def backlog_before(self, sink: str, notification_id: int) -> tuple[int, str | None]:
        """How many wait before this notification, and the oldest one's error if it failed.

        A sink that is down holds its whole queue in order: what is behind waits on it.
        """
        waiting = (
            AlertNotification.sink == sink,
            AlertNotification.id < notification_id,
            AlertNotification.delivered_at.is_(None),
            AlertNotification.gave_up_at.is_(None),
        )
        with self.read() as session:
            count = int(session.execute(select(func.count()).where(*waiting)).scalar() or 0)
            head = session.execute(
                select(AlertNotification.last_error)
                .where(*waiting, AlertNotification.attempts > 0)
                .order_by(AlertNotification.id)
                .limit(1)
            ).scalar_one_or_none()
        return count, head
