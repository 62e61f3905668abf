"""Events: record, list, acknowledge, and the state changes that commit with their event.

Every session-level function works inside the caller's session so related writes
commit together: check states with their transition events, the reboot-required latch
with the event that clears it, a new boot id with the reboot event. An event's card
identity is completed from the ``cards`` table: an Xid line names only a PCI address and
a check names only an index, but the history must say which physical card (UUID,
serial) it was even after the cards are moved around.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Table, and_, or_, select, update
from sqlalchemy.orm import Session

from daemon.store import keyvalue
from daemon.store.db import (
    Database,
    StoreInputError,
    check_list_limit,
    mark_news,
    require_aware,
)
from daemon.store.keyvalue import ClearHow, Latch
from daemon.store.models import Card, Event, StoredRow
from hwcheck.model import CheckResult, EventKind, Severity

EVENTS: Table = Event.__table__  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class EventRow(StoredRow):
    """One stored event: ``{id, ts, kind, card, xid, severity, message}`` and more."""

    id: int
    ts: datetime
    kind: EventKind
    severity: Severity
    message: str
    card: int | None = None
    card_uuid: str | None = None
    card_serial: str | None = None
    pci_bus_id: str | None = None
    xid: int | None = None
    details: dict[str, Any] | None = None
    boot_id: str | None = None
    kmsg_seq: int | None = None
    acked_at: datetime | None = None
    acked_by: str | None = None

    @property
    def is_new_boot(self) -> bool:
        """A ``reboot`` event of the new boot itself, not the latch clearing beside it.

        The clearing carries how the latch was cleared (``details.how``); the new boot
        does not. Charts and alerts tell the two apart by this field, never by the message.
        """
        return self.kind is EventKind.REBOOT and not (self.details or {}).get("how")

    @property
    def acked(self) -> bool:
        """Whether someone acknowledged it."""
        return self.acked_at is not None


@dataclass(frozen=True, slots=True)
class CardIdentity:
    """Which physical card an event is about, as completely as is known."""

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


def parse_severity(severity: str) -> Severity:
    """``severity`` as a ``Severity``; an unknown one is a one-line input error."""
    try:
        return Severity(severity)
    except ValueError:
        choices = "|".join(s.value for s in Severity)
        raise StoreInputError(f"unknown event severity {severity!r}: expected {choices}") from None


def card_identity(
    session: Session, card: int | None, uuid: str | None, pci_bus_id: str | None
) -> CardIdentity:
    """Complete a card's identity from what is known (UUID, then PCI address, then index)."""
    if uuid is not None:
        where = Card.uuid == uuid
    elif pci_bus_id is not None:
        where = Card.pci_bus_id == pci_bus_id
    elif card is not None:
        where = Card.index == card
    else:
        return CardIdentity(None, None, None, None)
    row = session.execute(
        select(Card).where(where).order_by(Card.last_seen.desc()).limit(1)
    ).scalar_one_or_none()
    if row is None:
        return CardIdentity(card, uuid, None, pci_bus_id)
    return CardIdentity(
        card if card is not None else row.index,
        uuid or row.uuid,
        row.serial,
        pci_bus_id or row.pci_bus_id,
    )


def event_values(
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
    kmsg_seq: int | None = None,
) -> dict[str, Any]:
    """The ``events`` row to insert: arguments checked, card identity completed."""
    who = card_identity(session, card, card_uuid, pci_bus_id)
    return {
        "ts": require_aware(ts or datetime.now(UTC), "event time"),
        "kind": parse_kind(kind),
        "severity": parse_severity(severity),
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


def insert_event(session: Session, kind: str, severity: str, message: str, **extra: Any) -> int:
    """Insert one event inside the caller's session; its id (``extra``: ``event_values``)."""
    values = event_values(session, kind, severity, message, **extra)
    mark_news(session)
    return int(
        session.execute(EVENTS.insert().values(**values).returning(EVENTS.c.id)).scalar_one()
    )


def _check_key(result: CheckResult) -> str:
    return f"{result.id}:{'rig' if result.card is None else result.card}"


def _clear_latch(
    session: Session, reason: str, by: str, how: ClearHow, ts: datetime
) -> Latch | None:
    keyvalue.lock_key(session, keyvalue.REBOOT_LATCH)
    current = keyvalue.get_latch(session)
    if current is None:
        return None
    keyvalue.delete_value(session, keyvalue.REBOOT_LATCH)
    insert_event(
        session,
        EventKind.REBOOT if how == "reboot" else EventKind.OPERATOR,
        Severity.INFO,
        f"reboot-required latch cleared by {by} ({how}): {reason}",
        details={
            "latch_reason": current.reason,
            "latch_source": current.source,
            "latch_since": current.since.isoformat(),
            "cleared_by": by,
            "how": how,
            "reason": reason,
        },
        ts=ts,
    )
    return current


class EventQueries(Database):
    """``Store`` methods for events and the state changes recorded as events."""

    def record_event(
        self,
        kind: EventKind | str,
        severity: Severity | str,
        message: str,
        card: int | None = None,
        *,
        card_uuid: str | None = None,
        pci_bus_id: str | None = None,
        xid: int | None = None,
        details: dict[str, Any] | None = None,
        ts: datetime | None = None,
        boot_id: str | None = None,
    ) -> int:
        """Store one event (``kind``: an ``EventKind``, ``severity``: a ``Severity``); its id."""
        with self.write() as session:
            return insert_event(
                session,
                kind,
                severity,
                message,
                card=card,
                card_uuid=card_uuid,
                pci_bus_id=pci_bus_id,
                xid=xid,
                details=details,
                ts=ts,
                boot_id=boot_id,
            )

    def list_events(
        self,
        since: datetime | None = None,
        kind: str | None = None,
        limit: int = 100,
        card: int | None = None,
        *,
        until: datetime | None = None,
        before_id: int | None = None,
        acked: bool | None = None,
        min_severity: Severity | None = None,
    ) -> list[EventRow]:
        """Events from ``since`` to ``until`` (both included), of ``kind``, about ``card``.

        ``min_severity``: that severity or worse (``info`` ranks with ``ok``: every event).
        Newest first. ``before_id`` is the keyset cursor of the next page: only events
        listed after that one (older, or as old with a smaller id), so a page is stable
        while new events arrive. An unknown ``before_id`` lists nothing.
        """
        check_list_limit(limit)
        stmt = select(Event)
        if since is not None:
            stmt = stmt.where(Event.ts >= require_aware(since, "since"))
        if until is not None:
            stmt = stmt.where(Event.ts <= require_aware(until, "until"))
        if acked is not None:
            stmt = stmt.where(Event.acked_at.is_not(None) if acked else Event.acked_at.is_(None))
        if before_id is not None:
            cursor_ts = select(Event.ts).where(Event.id == before_id).scalar_subquery()
            stmt = stmt.where(
                or_(Event.ts < cursor_ts, and_(Event.ts == cursor_ts, Event.id < before_id))
            )
        if kind is not None:
            stmt = stmt.where(Event.kind == parse_kind(kind))
        if card is not None:
            stmt = stmt.where(Event.card == card)
        if min_severity is not None:
            worse = [s for s in Severity if s.rank >= min_severity.rank]
            stmt = stmt.where(Event.severity.in_(worse))
        stmt = stmt.order_by(Event.ts.desc(), Event.id.desc()).limit(limit)
        with self.read() as session:
            return [EventRow.from_model(event) for event in session.execute(stmt).scalars()]

    def get_event(self, event_id: int) -> EventRow | None:
        """One event by id."""
        with self.read() as session:
            event = session.get(Event, event_id)
            return None if event is None else EventRow.from_model(event)

    def ack_event(self, event_id: int, by: str, now: datetime | None = None) -> bool:
        """Acknowledge an event (the first acknowledgement is kept); False if there is none."""
        ts = require_aware(now or datetime.now(UTC), "ack time")
        with self.write() as session:
            result = session.execute(
                update(Event)
                .where(Event.id == event_id, Event.acked_at.is_(None))
                .values(acked_at=ts, acked_by=by)
            )
            if result.rowcount:  # type: ignore[attr-defined]
                return True
            return session.execute(select(Event.id).where(Event.id == event_id)).first() is not None

    def record_check_transitions(
        self, results: Sequence[CheckResult], now: datetime | None = None
    ) -> list[CheckResult]:
        """Store each check's severity; record an event only for those that changed.

        A check never seen before counts as having been ``ok``, so a first-ever warning
        is a transition and a first-ever ``ok`` is not. Returns the results that changed.
        """
        ts = require_aware(now or datetime.now(UTC), "check time")
        with self.write() as session:
            keyvalue.lock_key(session, keyvalue.CHECK_SEVERITIES)
            stored = keyvalue.check_severities(session)
            changed: list[CheckResult] = []
            for result in results:
                key = _check_key(result)
                previous = stored.get(key, Severity.OK.value)
                if previous == result.severity.value:
                    continue
                changed.append(result)
                stored[key] = result.severity.value
                insert_event(
                    session,
                    EventKind.CHECK,
                    result.severity,
                    f"{result.id} {previous} -> {result.severity.value}: {result.message}",
                    card=result.card,
                    details={
                        "check": result.id,
                        "previous": previous,
                        "remedy": result.remedy,
                        **({} if result.confirmed else {"confirmed": False}),
                    },
                    ts=ts,
                )
            if changed:
                keyvalue.set_value(session, keyvalue.CHECK_SEVERITIES, stored, ts)
        return changed

    def clear_latch(
        self, reason: str, by: str, how: ClearHow, now: datetime | None = None
    ) -> Latch | None:
        """Clear the latch recording who cleared it and how; the cleared latch or ``None``."""
        if how not in ("reboot", "operator"):
            raise StoreInputError(
                f"unknown way to clear the latch {how!r}: expected reboot|operator"
            )
        ts = require_aware(now or datetime.now(UTC), "clear time")
        with self.write() as session:
            return _clear_latch(session, reason, by, how, ts)

    def record_boot(self, boot_id: str, now: datetime | None = None) -> str | None:
        """Remember ``boot_id``; a change is a reboot: record it and clear the latch.

        One transaction, so a crash can never store the new boot id while losing the
        reboot event or leaving the latch set for the whole boot. Returns the previous
        boot id when this is a new boot, ``None`` when it is the same boot or the first.
        """
        ts = require_aware(now or datetime.now(UTC), "boot time")
        with self.write() as session:
            previous = keyvalue.get_boot_id(session)
            if previous == boot_id:
                return None
            keyvalue.set_value(session, keyvalue.LAST_BOOT_ID, boot_id)
            if previous is None:
                return None
            insert_event(
                session,
                EventKind.REBOOT,
                Severity.INFO,
                f"host rebooted (boot id {previous} -> {boot_id})",
                ts=ts,
                boot_id=boot_id,
            )
            _clear_latch(session, "the host rebooted", "fleetd", "reboot", ts)
            return previous
