"""Xid events: stored once per kernel record, atomically with the kernel-log cursor.

The unique key ``(kind, boot_id, kmsg_seq)`` makes storing the same kernel record twice
a no-op, and the cursor past a record moves in the same transaction as the record, so a
daemon restart neither loses nor double counts an Xid. A restarted daemon rebuilds its
"Xids since boot" from here instead of re-reading the kernel log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from daemon.store import keyvalue
from daemon.store.db import Database, insert_ignore_returning_id, mark_news
from daemon.store.events import EVENTS, EventRow, event_values, parse_severity
from daemon.store.models import Event
from hwcheck.checks.xid_since_boot import xid_severity
from hwcheck.kernellog.records import KernelLogCursor
from hwcheck.model import ClassifiedXid, EventKind, Severity, XidEvent, XidInfo

_XID_KEY = ("kind", "boot_id", "kmsg_seq")


@dataclass(frozen=True, slots=True)
class XidRecord:
    """An Xid event to store; ``boot_id``+``kmsg_seq`` identify the kernel record."""

    ts: datetime
    xid: int
    message: str
    severity: Severity = Severity.WARNING
    card: int | None = None
    card_uuid: str | None = None
    pci_bus_id: str | None = None
    boot_id: str | None = None
    kmsg_seq: int | None = None
    details: dict[str, Any] | None = None

    @classmethod
    def from_classified(
        cls,
        classified: ClassifiedXid,
        ts: datetime,
        *,
        card: int | None = None,
        card_uuid: str | None = None,
        severity: Severity | None = None,
        message: str | None = None,
    ) -> XidRecord:
        """Build the record from the parser's event and the catalogue's verdict.

        ``details`` keeps the kernel line and the driver's own message, so the event can
        be classified again later (``Store.xids_for_boot``) whatever ``message`` says.
        Without a ``severity`` it is the ``xid_since_boot`` check's own rule, so the stored
        event and the check never disagree on how bad an Xid is.
        """
        event, info = classified.event, classified.info
        return cls(
            ts=ts,
            xid=event.xid,
            message=event.message if message is None else message,
            severity=xid_severity(classified) if severity is None else severity,
            card=card,
            card_uuid=card_uuid,
            pci_bus_id=event.pci_bus_id,
            boot_id=event.boot_id,
            kmsg_seq=event.seq,
            details={
                "class": info.xid_class.value,
                "action": info.action.value,
                "title": info.title,  # the explanation is the catalogue's, shown once
                "text": event.text,
                "xid_message": event.message,
                "pid": event.pid,
                "process": event.process,
                **({} if event.ts_kernel is None else {"ts_kernel": event.ts_kernel.isoformat()}),
            },
        )


@dataclass(frozen=True, slots=True)
class _XidOverrides:
    """What the caller of ``record_xid_and_cursor`` says on top of the Xid itself."""

    card: int | None
    card_uuid: str | None
    severity: str | None
    message: str | None
    ts: datetime | None

    def apply(self, xid: XidRecord | ClassifiedXid, cursor: KernelLogCursor | None) -> XidRecord:
        """One ``XidRecord`` from either form; its key falls back to the cursor's."""
        level = None if self.severity is None else parse_severity(self.severity)
        if isinstance(xid, ClassifiedXid):
            record = XidRecord.from_classified(
                xid,
                self.ts or datetime.now(UTC),
                card=self.card,
                card_uuid=self.card_uuid,
                severity=level,
                message=self.message,
            )
        else:
            record = replace(
                xid,
                card=xid.card if self.card is None else self.card,
                card_uuid=xid.card_uuid if self.card_uuid is None else self.card_uuid,
                severity=xid.severity if level is None else level,
                message=xid.message if self.message is None else self.message,
                ts=xid.ts if self.ts is None else self.ts,
            )
        if cursor is not None and (record.boot_id is None or record.kmsg_seq is None):
            record = replace(record, boot_id=cursor.boot_id, kmsg_seq=cursor.last_seq)
        return record


class XidClassifier(Protocol):
    """What can judge an Xid again (``hwcheck.kernellog.catalogue.XidCatalogue``)."""

    def classify(self, event: XidEvent) -> XidInfo:
        """The class, action and explanation for ``event``."""
        ...


def _add_xid_event(session: Session, record: XidRecord) -> bool:
    """Insert an Xid event; False when that kernel record (boot id, seq) is already stored."""
    values = event_values(
        session,
        EventKind.XID,
        record.severity,
        record.message,
        card=record.card,
        card_uuid=record.card_uuid,
        pci_bus_id=record.pci_bus_id,
        xid=record.xid,
        details=record.details,
        ts=record.ts,
        boot_id=record.boot_id,
        kmsg_seq=record.kmsg_seq,
    )
    mark_news(session)
    return insert_ignore_returning_id(session, EVENTS, values, _XID_KEY) is not None


def _classified(row: Event, classifier: XidClassifier) -> ClassifiedXid | None:
    if row.xid is None:
        return None
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
    return ClassifiedXid(event=event, info=classifier.classify(event))


def kernel_time_of(row: EventRow) -> dict[str, str]:
    """``{"ts_kernel": ISO}`` for an Xid event whose kernel time is known, else ``{}``."""
    value = (row.details or {}).get("ts_kernel") if row.kind == EventKind.XID else None
    return {"ts_kernel": value} if isinstance(value, str) else {}


class XidQueries(Database):
    """``Store`` methods for Xid events and the kernel-log cursor that goes with them."""

    def add_xid_event(self, record: XidRecord) -> bool:
        """Store an Xid event; False when that kernel record was stored before."""
        with self.write() as session:
            return _add_xid_event(session, record)

    def record_xid_and_cursor(
        self,
        xid: XidRecord | ClassifiedXid,
        cursor: KernelLogCursor | None = None,
        *,
        card: int | None = None,
        card_uuid: str | None = None,
        severity: str | None = None,
        message: str | None = None,
        ts: datetime | None = None,
    ) -> bool:
        """Store an Xid and move the kernel-log cursor in ONE transaction; True if new.

        ``cursor`` is the position of this very kernel record (``None`` when the source
        has no sequence numbers: the Xid is stored, nothing is deduplicated). A crash
        before the commit leaves neither (the record is read again and stored); after
        it, both (the record is skipped by the cursor, or deduplicated by its key).
        ``card``/``card_uuid``/``severity``/``message``/``ts`` override what ``xid`` says.
        """
        overrides = _XidOverrides(card, card_uuid, severity, message, ts)
        record = overrides.apply(xid, cursor)
        return self.record_xids_and_cursor([record], cursor) == 1

    def record_xids_and_cursor(
        self, records: Sequence[XidRecord], cursor: KernelLogCursor | None
    ) -> int:
        """Store several Xids and the cursor past them atomically; how many were new."""
        with self.write() as session:
            new = sum(_add_xid_event(session, record) for record in records)
            if cursor is not None:
                keyvalue.set_cursor(session, cursor)
        return new

    def xids_for_boot(self, boot_id: str, classifier: XidClassifier) -> list[ClassifiedXid]:
        """The stored Xids of ``boot_id``, oldest first, classified again by ``classifier``.

        Classifying afresh applies the current catalogue and overrides.
        """
        stmt = (
            select(Event)
            .where(Event.kind == EventKind.XID, Event.boot_id == boot_id)
            .order_by(Event.kmsg_seq, Event.id)
        )
        with self.read() as session:
            rows = list(session.execute(stmt).scalars())
        found = (_classified(row, classifier) for row in rows)
        return [xid for xid in found if xid is not None]
