"""Symptoms folded into their cause: which firing alert inhibits another (store side).

The table (cause name -> symptom names) comes from the alert rules
(``daemon.alerts.inhibit``) through ``AlertPolicy``; here it is only applied to the rows.
An inhibited alert is stored like any other but never notified (``notified_at`` stays
``None``): that is how a later pass knows it is a folded symptom, to list it under its
cause ("also affected") and to send it once its cause is gone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from daemon.store.models import Alert

FIRING = "firing"
Inhibits = Mapping[str, frozenset[str]]


def _name(labels: Mapping[str, Any] | None) -> str:
    return str((labels or {}).get("alertname") or "")


def _same_place(symptom: Mapping[str, Any], cause: Mapping[str, Any]) -> bool:
    """A card's cause covers that card's symptoms and rig-wide ones; a rig-wide one, all."""
    card, cause_card = symptom.get("card"), cause.get("card")
    return card is None or cause_card is None or card == cause_card


def _firing(session: Session) -> list[Alert]:
    stmt = select(Alert).where(Alert.status == FIRING).order_by(Alert.id)
    return list(session.execute(stmt).scalars())


def cause_of(session: Session, labels: Mapping[str, Any], inhibits: Inhibits) -> Alert | None:
    """The firing, notified alert that explains an alert with ``labels`` (None: none does)."""
    name = _name(labels)
    causes = {cause for cause, symptoms in inhibits.items() if name in symptoms}
    if not causes:
        return None
    for alert in _firing(session):
        if (
            _name(alert.labels) in causes
            and alert.notified_at is not None
            and _same_place(labels, alert.labels)
        ):
            return alert
    return None


def folded_into(session: Session, cause: Alert, inhibits: Inhibits) -> list[str]:
    """The summaries of the firing symptoms folded into ``cause`` ("also affected")."""
    if not any(cause_name == _name(cause.labels) for cause_name in inhibits):
        return []
    folded = []
    for alert in _firing(session):
        if alert.notified_at is not None or alert.one_shot or alert.id == cause.id:
            continue
        found = cause_of(session, alert.labels, inhibits)
        if found is not None and found.id == cause.id:
            folded.append(alert.summary)
    return folded


def released(session: Session, inhibits: Inhibits) -> list[Alert]:
    """Folded symptoms still firing whose cause is gone: news of their own now."""
    return [
        alert
        for alert in _firing(session)
        if alert.notified_at is None
        and not alert.one_shot
        and cause_of(session, alert.labels, inhibits) is None
    ]
