"""The notifications one pass of the alert rules queues: one per sink and board-level fault.

A board-level fault (PWRBRK# asserted on every slot, an Xid storm after a driver fault)
turns the same check, or the same Xid class, bad on every card in the same poll: four
alerts (one per card, so each resolves on its own) but one thing for a person to do.
Within one pass (one transaction), per-card alerts with the same name, severity and
status share one notification per sink, naming the cards ("Power brake on cards 0-3:
..."; ``hwcheck.card_ranges``, the wording status and the dashboard use), with every member in its ``members``. Nothing waits for it: the pass
commits its notifications at once, as it always did; grouping only decides how many.
A card that turns bad in a later pass gets a notification of its own.

A cause's notification also lists the symptoms folded into it (``also_affected``,
``daemon.store.alert_inhibit``): those firing when it is queued, and one folded later in
the same pass.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Table, select, update
from sqlalchemy.orm import Session

from daemon.store.alert_inhibit import Inhibits, folded_into
from daemon.store.models import Alert, AlertNotification
from hwcheck.card_ranges import cards_text

NOTIFICATIONS: Table = AlertNotification.__table__  # type: ignore[assignment]
_ON_CARD = re.compile(r" on card \d+\b")


def snapshot(alert: Alert, status: str, repeat: bool) -> dict[str, Any]:
    """What a notification says: the alert as it was when the notification was queued."""
    return {
        "alert_id": alert.id,
        "fingerprint": alert.fingerprint,
        "rule": alert.rule,
        "severity": alert.severity.value,
        "status": status,
        "repeat": repeat,
        "summary": alert.summary,
        "advice": alert.advice,
        "labels": dict(alert.labels),
        "count": alert.count,
        "started_at": alert.started_at.isoformat(),
        "resolved_at": None if alert.resolved_at is None else alert.resolved_at.isoformat(),
    }


def group_key(alert: Alert) -> tuple[str, str, str] | None:
    """What per-card alerts share to be sent together (``None``: a rig-wide alert)."""
    labels = alert.labels or {}
    if labels.get("card") is None or alert.one_shot:
        return None
    return (alert.rule, str(labels.get("alertname", "")), alert.severity.value)


def _member(payload: dict[str, Any]) -> dict[str, Any]:
    keys = ("alert_id", "fingerprint", "summary", "labels", "count", "started_at", "resolved_at")
    return {key: payload[key] for key in keys}


def merged(group: dict[str, Any], member: dict[str, Any]) -> dict[str, Any]:
    """``group`` (a notification's payload) with ``member`` added: cards, summary, members."""
    members = [*(group.get("members") or [_member(group)]), _member(member)]
    cards = sorted({int(m["labels"]["card"]) for m in members})
    listed = cards_text(cards)
    first = members[0]["summary"]
    summary = _ON_CARD.sub(f" on {listed}", first, count=1)
    if summary == first:  # a summary that does not say "on card N"
        summary = f"{first} ({listed})"
    return {**group, "summary": summary, "cards": cards, "members": members}


GROUP_REACH = 16  # a group's first alert is at most this many ids before its members


def sinks_told(session: Session, alert_id: int) -> list[str]:
    """The sinks told this alert fired, alone or in a group (only they hear it resolve).

    A group's notification belongs to its first alert, created just before the others in
    the same pass: the firing notifications of the few alerts before this one are read
    and their members matched here (no JSON query: SQLite and PostgreSQL differ there).
    """
    stmt = select(
        AlertNotification.alert_id, AlertNotification.sink, AlertNotification.payload
    ).where(
        AlertNotification.alert_id.between(alert_id - GROUP_REACH, alert_id),
        AlertNotification.status == "firing",
    )
    told = {
        sink
        for owner, sink, payload in session.execute(stmt)
        if owner == alert_id
        or any(m.get("alert_id") == alert_id for m in (payload or {}).get("members") or [])
    }
    return sorted(told)


class NotificationBatch:
    """Queues the notifications of one pass, sharing one among a board-level group."""

    def __init__(self, session: Session, now: datetime, inhibits: Inhibits | None = None) -> None:
        self._session = session
        self.now = now
        self.inhibits: Inhibits = inhibits or {}
        self._groups: dict[tuple[object, ...], tuple[int, dict[str, Any]]] = {}
        self._queued: dict[int, list[int]] = {}  # alert id -> its rows queued in this pass

    def fold(self, cause: Alert, symptom: Alert) -> None:
        """``symptom`` was folded into ``cause``: its rows of this pass list it too."""
        for row_id in self._queued.get(cause.id, []):
            payload = self._session.execute(
                select(NOTIFICATIONS.c.payload).where(NOTIFICATIONS.c.id == row_id)
            ).scalar_one()
            payload = {
                **payload,
                "also_affected": [*(payload.get("also_affected") or []), symptom.summary],
            }
            self._session.execute(
                update(NOTIFICATIONS).where(NOTIFICATIONS.c.id == row_id).values(payload=payload)
            )
            for key, (grouped_row, _) in list(self._groups.items()):
                if grouped_row == row_id:  # later members merge into what the row now says
                    self._groups[key] = (row_id, payload)

    def queue(self, alert: Alert, sinks: Sequence[str], status: str, repeat: bool) -> int:
        """One notification per sink (or a place in this pass's group); how many are new."""
        payload = snapshot(alert, status, repeat)
        if status == "firing" and self.inhibits:
            affected = folded_into(self._session, alert, self.inhibits)
            if affected:
                payload["also_affected"] = affected
        key = group_key(alert)
        new = 0
        for sink in sinks:
            grouped = None if key is None else (*key, sink, status, repeat)
            if grouped is not None and grouped in self._groups:
                row_id, group = self._groups[grouped]
                group = merged(group, payload)
                self._session.execute(
                    update(NOTIFICATIONS).where(NOTIFICATIONS.c.id == row_id).values(payload=group)
                )
                self._groups[grouped] = (row_id, group)
                self._queued.setdefault(alert.id, []).append(row_id)
                continue
            row_id = self._session.execute(
                NOTIFICATIONS.insert()
                .values(
                    uid=str(uuid.uuid4()),  # the receiver de-duplicates on it
                    alert_id=alert.id,
                    sink=sink,
                    status=status,
                    repeat=repeat,
                    payload=payload,
                    created_at=self.now,
                    attempts=0,
                )
                .returning(NOTIFICATIONS.c.id)
            ).scalar_one()
            if grouped is not None:
                self._groups[grouped] = (int(row_id), payload)
            self._queued.setdefault(alert.id, []).append(int(row_id))
            new += 1
        return new
