"""What the store knows of one card across its life on this rig: the passport's raw material.

A card is the ``cards`` row of its NVML UUID (which survives slot moves); its history is
the events that name it (``card_uuid``: Xids, its first sighting and every move), and the
diagnostic runs that tested it: ``diag pcie``/``compute`` name its UUID in their details,
the memory test names the PCI address it sat at (matched here against where the card
was at the run's time). Whether a card is out of service lives in the ``kv`` table, so a
restart or a reboot keeps it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import or_, select

from daemon.store.db import Database
from daemon.store.events import EventRow
from daemon.store.keyvalue import delete_value, get_value, lock_key, set_value
from daemon.store.models import Card, Event
from hwcheck.model import EventKind

OUT_OF_SERVICE = "out_of_service"
HISTORY_LIMIT = 2000


def card_row(card: Card) -> dict[str, Any]:
    """A ``cards`` row as a document."""
    return {
        "uuid": card.uuid,
        "serial": card.serial,
        "name": card.name,
        "pci_bus_id": card.pci_bus_id,
        "index": card.index,
        "first_seen": card.first_seen.isoformat(),
        "last_seen": card.last_seen.isoformat(),
    }


class PassportQueries(Database):
    """``Store`` methods for cards' passports and their out-of-service marks."""

    def known_cards(self) -> list[dict[str, Any]]:
        """Every card this rig has seen (``cards`` rows), most recently seen first."""
        with self.read() as session:
            rows = session.execute(select(Card).order_by(Card.last_seen.desc())).scalars()
            return [card_row(card) for card in rows]

    def card_events(self, uuid: str) -> list[EventRow]:
        """Events naming card ``uuid``, and every diagnostic run and crash (newest first).

        The caller keeps the runs that tested this card (a memory test names only the
        address, so one at an address the card has held may have tested another card).
        """
        with self.read() as session:
            stmt = (
                select(Event)
                .where(
                    or_(
                        Event.card_uuid == uuid,
                        Event.kind == EventKind.DIAG,
                        Event.kind == EventKind.CRASH,
                    )
                )
                .order_by(Event.ts.desc(), Event.id.desc())
                .limit(HISTORY_LIMIT)
            )
            rows = [EventRow.from_model(event) for event in session.execute(stmt).scalars()]
        return [
            row
            for row in rows
            if row.card_uuid == uuid or row.kind in (EventKind.DIAG, EventKind.CRASH)
        ]

    def out_of_service(self) -> dict[str, dict[str, Any]]:
        """UUID -> ``{reason, since, actor, serial}`` of the cards taken out of service."""
        with self.read() as session:
            value = get_value(session, OUT_OF_SERVICE)
        return {str(k): dict(v) for k, v in value.items()} if isinstance(value, dict) else {}

    def set_out_of_service(
        self, uuid: str, serial: str | None, reason: str | None, actor: str
    ) -> dict[str, dict[str, Any]]:
        """Mark card ``uuid`` out of service (``reason``), or back in (None); all marks."""
        now = datetime.now(UTC)
        with self.write() as session:
            lock_key(session, OUT_OF_SERVICE)
            marks = dict(get_value(session, OUT_OF_SERVICE) or {})
            if reason is None:
                marks.pop(uuid, None)
            else:
                marks[uuid] = {
                    "reason": reason,
                    "since": now.isoformat(),
                    "actor": actor,
                    "serial": serial,
                }
            if marks:
                set_value(session, OUT_OF_SERVICE, marks, now)
            else:
                delete_value(session, OUT_OF_SERVICE)
            return marks
