"""Events: record, list, acknowledge, Xid dedupe and check-transition detection.

Every function works inside the caller's session so related writes commit together.
An event's card identity is completed from the ``cards`` table: an Xid line names only
a PCI address and a check names only an index, but the history must say which physical
card (UUID, serial) it was even after the cards are moved around.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import Table, select, update
from sqlalchemy.orm import Session

from daemon.store import kv
from daemon.store.coltypes import require_aware
from daemon.store.dialect import insert_ignore_returning_id
from daemon.store.errors import StoreInputError
from daemon.store.rows import EventKind, EventRow, EventSeverity, XidRecord
from daemon.store.schema import Card, Event
from hwcheck.model import CheckResult, ClassifiedXid, XidEvent, XidInfo

_EVENTS: Table = Event.__table__  # type: ignore[assignment]
_XID_KEY = ("kind", "boot_id", "kmsg_seq")
MAX_LIST_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class _Identity:
    card: int | None
    uuid: str | None
    serial: str | None
    pci_bus_id: str | None


def parse_kind(kind: str) -> EventKind:
    """``kind`` as an ``EventKind``; an unknown one is a one-line input error."""
    try:
        return EventKind(kind)
    except ValueError:
        choices = "|".join(k.value for k in EventKind)
        raise StoreInputError(f"unknown event kind {kind!r}: expected {choices}") from None


def parse_severity(severity: str) -> EventSeverity:
    """``severity`` as an ``EventSeverity``; an unknown one is a one-line input error."""
    try:
        return EventSeverity(severity)
    except ValueError:
        choices = "|".join(s.value for s in EventSeverity)
        raise StoreInputError(f"unknown event severity {severity!r}: expected {choices}") from None


def _identity(
    session: Session, card: int | None, uuid: str | None, pci_bus_id: str | None
) -> _Identity:
    """Complete a card's identity from what is known (UUID, then PCI address, then index)."""
    if uuid is not None:
        where = Card.uuid == uuid
    elif pci_bus_id is not None:
        where = Card.pci_bus_id == pci_bus_id
    elif card is not None:
        where = Card.card_index == card
    else:
        return _Identity(None, None, None, None)
    row = session.execute(
        select(Card).where(where).order_by(Card.last_seen.desc()).limit(1)
    ).scalar_one_or_none()
    if row is None:
        return _Identity(card, uuid, None, pci_bus_id)
    return _Identity(
        card if card is not None else row.card_index,
        uuid or row.uuid,
        row.serial,
        pci_bus_id or row.pci_bus_id,
    )


def _values(
    session: Session,
    *,
    ts: datetime,
    kind: EventKind,
    severity: EventSeverity,
    message: str,
    card: int | None,
    card_uuid: str | None,
    pci_bus_id: str | None,
    xid: int | None,
    details: dict[str, Any] | None,
    boot_id: str | None,
    kmsg_seq: int | None,
) -> dict[str, Any]:
    who = _identity(session, card, card_uuid, pci_bus_id)
    return {
        "ts": require_aware(ts, "event time"),
        "kind": kind.value,
        "severity": severity.value,
        "message": message,
        "card": who.card,
        "card_uuid": who.uuid,
        "card_serial": who.serial,
        "pci_bus_id": who.pci_bus_id,
        "xid": xid,
        "details": details,
        "boot_id": boot_id,
        "kmsg_seq": kmsg_seq,
    }


def record_event(
    session: Session,
    kind: str,
    severity: str,
    message: str,
    *,
    card: int | None = None,
    card_uuid: str | None = None,
    pci_bus_id: str | None = None,
    xid: int | None = None,
    details: dict[str, Any] | None = None,
    ts: datetime | None = None,
    boot_id: str | None = None,
) -> int:
    """Insert one event and return its id."""
    values = _values(
        session,
        ts=ts or datetime.now(UTC),
        kind=parse_kind(kind),
        severity=parse_severity(severity),
        message=message,
        card=card,
        card_uuid=card_uuid,
        pci_bus_id=pci_bus_id,
        xid=xid,
        details=details,
        boot_id=boot_id,
        kmsg_seq=None,
    )
    new_id = session.execute(_EVENTS.insert().values(**values).returning(_EVENTS.c.id)).scalar_one()
    return int(new_id)


def add_xid_event(session: Session, record: XidRecord) -> bool:
    """Insert an Xid event; False when that kernel record (boot id, seq) is already stored."""
    values = _values(
        session,
        ts=record.ts,
        kind=EventKind.XID,
        severity=record.severity,
        message=record.message,
        card=record.card,
        card_uuid=record.card_uuid,
        pci_bus_id=record.pci_bus_id,
        xid=record.xid,
        details=record.details,
        boot_id=record.boot_id,
        kmsg_seq=record.kmsg_seq,
    )
    return insert_ignore_returning_id(session, _EVENTS, values, _XID_KEY) is not None


class XidClassifier(Protocol):
    """What can judge an Xid again (``hwcheck.kernellog.catalogue.XidCatalogue``)."""

    def classify(self, event: XidEvent) -> XidInfo:
        """The class, action and explanation for ``event``."""
        ...


def xids_for_boot(session: Session, boot_id: str, classifier: XidClassifier) -> list[ClassifiedXid]:
    """The stored Xids of one boot, oldest first, classified again by ``classifier``.

    A restarted daemon rebuilds its "Xids since boot" from this instead of re-reading the
    kernel log; classifying afresh applies the current catalogue and overrides.
    """
    stmt = (
        select(Event)
        .where(Event.kind == EventKind.XID.value, Event.boot_id == boot_id)
        .order_by(Event.kmsg_seq, Event.id)
    )
    found: list[ClassifiedXid] = []
    for row in session.execute(stmt).scalars():
        if row.xid is None:
            continue
        details = row.details or {}
        pid = details.get("pid")
        process = details.get("process")
        event = XidEvent(
            xid=row.xid,
            text=str(details.get("text", "")),
            message=str(details.get("xid_message", row.message)),
            pci_bus_id=row.pci_bus_id,
            pid=pid if isinstance(pid, int) else None,
            process=process if isinstance(process, str) else None,
            seq=row.kmsg_seq,
            boot_id=row.boot_id,
        )
        found.append(ClassifiedXid(event=event, info=classifier.classify(event)))
    return found


def _row(event: Event) -> EventRow:
    return EventRow(
        id=event.id,
        ts=event.ts,
        kind=event.kind,
        severity=event.severity,
        message=event.message,
        card=event.card,
        card_uuid=event.card_uuid,
        card_serial=event.card_serial,
        pci_bus_id=event.pci_bus_id,
        xid=event.xid,
        details=event.details,
        boot_id=event.boot_id,
        kmsg_seq=event.kmsg_seq,
        acked_at=event.acked_at,
        acked_by=event.acked_by,
    )


def list_events(
    session: Session,
    since: datetime | None = None,
    kind: str | None = None,
    limit: int = 100,
    card: int | None = None,
) -> list[EventRow]:
    """Events at or after ``since``, of ``kind``, about ``card``: newest first."""
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise StoreInputError(f"limit {limit} out of range: expected 1..{MAX_LIST_LIMIT}")
    stmt = select(Event)
    if since is not None:
        stmt = stmt.where(Event.ts >= require_aware(since, "since"))
    if kind is not None:
        stmt = stmt.where(Event.kind == parse_kind(kind).value)
    if card is not None:
        stmt = stmt.where(Event.card == card)
    stmt = stmt.order_by(Event.ts.desc(), Event.id.desc()).limit(limit)
    return [_row(event) for event in session.execute(stmt).scalars()]


def get_event(session: Session, event_id: int) -> EventRow | None:
    """One event by id."""
    event = session.get(Event, event_id)
    return None if event is None else _row(event)


def ack_event(session: Session, event_id: int, by: str, now: datetime | None = None) -> bool:
    """Acknowledge an event (the first acknowledgement is kept); False if there is none."""
    result = session.execute(
        update(Event)
        .where(Event.id == event_id, Event.acked_at.is_(None))
        .values(acked_at=require_aware(now or datetime.now(UTC), "ack time"), acked_by=by)
    )
    if result.rowcount:  # type: ignore[attr-defined]
        return True
    return session.execute(select(Event.id).where(Event.id == event_id)).first() is not None


def _check_key(result: CheckResult) -> str:
    return f"{result.id}:{'rig' if result.card is None else result.card}"


def record_check_transitions(
    session: Session, results: Sequence[CheckResult], now: datetime | None = None
) -> list[CheckResult]:
    """Store each check's severity; record an event only for those that changed.

    A check never seen before counts as having been ``ok``, so a first-ever warning is a
    transition and a first-ever ``ok`` is not. Returns the results that changed.
    """
    ts = require_aware(now or datetime.now(UTC), "check time")
    kv.lock_key(session, kv.CHECK_SEVERITIES)
    stored: dict[str, str] = dict(kv.get_value(session, kv.CHECK_SEVERITIES) or {})
    changed: list[CheckResult] = []
    for result in results:
        key = _check_key(result)
        previous = stored.get(key, "ok")
        if previous == result.severity.value:
            continue
        changed.append(result)
        stored[key] = result.severity.value
        record_event(
            session,
            EventKind.CHECK,
            result.severity.value,
            f"{result.id} {previous} -> {result.severity.value}: {result.message}",
            card=result.card,
            details={"check": result.id, "previous": previous, "remedy": result.remedy},
            ts=ts,
        )
    if changed:
        kv.set_value(session, kv.CHECK_SEVERITIES, stored, ts)
    return changed


def check_severities(session: Session) -> dict[str, str]:
    """The stored severity per ``"<check id>:<card index|rig>"``."""
    return dict(kv.get_value(session, kv.CHECK_SEVERITIES) or {})
