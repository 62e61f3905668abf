"""Cards and raw samples: the per-poll write path, kept cheap because it runs every second.

The ``cards`` row of each card is written only when something about it changed (new
card, moved slot, renamed) or its ``last_seen`` is more than ``LAST_SEEN_EVERY_S`` old;
otherwise a poll is one batched INSERT of one row per card. ``CardRegistry`` remembers
what is in ``cards`` for that, per ``Store`` (no module state), updated only after the
transaction that wrote it has committed.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Dialect, Table, select, update
from sqlalchemy.orm import Session

from daemon.store.coltypes import require_aware, to_epoch_us
from daemon.store.dialect import DriverInsertIgnore, insert_ignore_many
from daemon.store.events import record_event
from daemon.store.rows import CardMove, CardRow, EngineSampleRow, EventKind, EventSeverity
from daemon.store.schema import Card, EngineSample, Sample
from hwcheck.model import GpuSnapshot, RigSnapshot, normalize_pci_bus_id

LAST_SEEN_EVERY_S = 60.0
_SAMPLES: Table = Sample.__table__  # type: ignore[assignment]
_ENGINE_SAMPLES: Table = EngineSample.__table__  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class KnownCard:
    """What the ``cards`` table holds for one UUID, as last written."""

    id: int
    raw_pci_bus_id: str  # as the backend spelled it: compared before normalising
    pci_bus_id: str
    index: int
    name: str
    serial: str | None
    last_seen: datetime


class CardRegistry:
    """UUID -> ``cards`` row, shared by the threads of one ``Store``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[str, KnownCard] = {}

    def copy(self) -> dict[str, KnownCard]:
        """A private copy to plan one unit of work against."""
        with self._lock:
            return dict(self._known)

    def committed(self, updates: dict[str, KnownCard]) -> None:
        """Remember rows that are now committed."""
        with self._lock:
            self._known.update(updates)

    def clear(self) -> None:
        """Forget everything (the next poll re-reads ``cards``)."""
        with self._lock:
            self._known.clear()


@dataclass(slots=True)
class SampleWrite:
    """What one ``record_samples`` unit of work did."""

    moves: list[CardMove]
    updates: dict[str, KnownCard]
    rows: int


def _pci(raw: str) -> str:
    try:
        return normalize_pci_bus_id(raw)
    except ValueError:
        return raw.strip().lower()


def _same_identity(known: KnownCard | None, card: GpuSnapshot) -> bool:
    return (
        known is not None
        and known.raw_pci_bus_id == card.pci_bus_id
        and known.index == card.index
        and known.name == card.name
        and known.serial == card.serial
    )


def _write_card(
    session: Session, card: GpuSnapshot, pci: str, ts: datetime, row: Card | None
) -> tuple[KnownCard, CardMove | None]:
    """Insert or update one ``cards`` row; the move, if the card changed place."""
    move: CardMove | None = None
    if row is None:
        row = Card(
            uuid=card.uuid,
            serial=card.serial,
            name=card.name,
            pci_bus_id=pci,
            card_index=card.index,
            first_seen=ts,
            last_seen=ts,
        )
        session.add(row)
        session.flush()
        record_event(
            session,
            EventKind.DAEMON,
            EventSeverity.INFO,
            f"new card {card.uuid} ({card.name}, serial {card.serial or 'unknown'}) "
            f"at {pci} as card {card.index}",
            card=card.index,
            card_uuid=card.uuid,
            pci_bus_id=pci,
            ts=ts,
        )
    else:
        if row.pci_bus_id != pci or row.card_index != card.index:
            move = CardMove(card.uuid, row.pci_bus_id, pci, row.card_index, card.index)
            record_event(
                session,
                EventKind.DAEMON,
                EventSeverity.INFO,
                f"card {card.uuid} moved from {row.pci_bus_id} (card {row.card_index}) "
                f"to {pci} (card {card.index})",
                card=card.index,
                card_uuid=card.uuid,
                pci_bus_id=pci,
                details={"old_pci_bus_id": row.pci_bus_id, "old_index": row.card_index},
                ts=ts,
            )
        row.pci_bus_id = pci
        row.card_index = card.index
        row.name = card.name
        row.serial = card.serial
        row.last_seen = max(row.last_seen, ts)
    known = KnownCard(
        row.id, card.pci_bus_id, pci, card.index, card.name, card.serial, row.last_seen
    )
    return known, move


def upsert_cards(
    session: Session, snapshot: RigSnapshot, known: dict[str, KnownCard]
) -> tuple[dict[str, KnownCard], list[CardMove]]:
    """Bring ``cards`` up to date with ``snapshot``; ``known`` is updated in place.

    Returns the rows written (to hand to the registry after commit) and the moves.
    """
    ts = require_aware(snapshot.taken_at, "snapshot time")
    refresh_before = ts - timedelta(seconds=LAST_SEEN_EVERY_S)
    changed: list[GpuSnapshot] = []
    touched: list[tuple[str, KnownCard]] = []
    for card in snapshot.cards:
        entry = known.get(card.uuid)
        if entry is None or not _same_identity(entry, card):
            changed.append(card)
        elif entry.last_seen <= refresh_before:
            touched.append((card.uuid, entry))
    written: dict[str, KnownCard] = {}
    moves: list[CardMove] = []
    if touched:
        session.execute(
            update(Card)
            .where(Card.id.in_([entry.id for _, entry in touched]))
            .values(last_seen=ts)
            .execution_options(synchronize_session=False)
        )
        for uuid, entry in touched:
            written[uuid] = replace(entry, last_seen=ts)
    if changed:
        rows = {
            row.uuid: row
            for row in session.execute(
                select(Card).where(Card.uuid.in_([card.uuid for card in changed]))
            ).scalars()
        }
        for card in changed:
            written[card.uuid], move = _write_card(
                session, card, _pci(card.pci_bus_id), ts, rows.get(card.uuid)
            )
            if move is not None:
                moves.append(move)
    known.update(written)
    return written, moves


def _sample_row(card_id: int, ts_us: int, card: GpuSnapshot) -> tuple[Any, ...]:
    """One ``samples`` row in column order and driver representation (time in epoch µs)."""
    return (
        card_id,
        ts_us,
        card.power_draw_w,
        card.power_limit_w,
        card.temperature_c,
        card.memory_temperature_c,
        card.memory_used_mib,
        card.sm_clock_mhz,
        card.clock_event_reasons,
        card.pcie_gen_current,
        card.pcie_width_current,
        card.lost,
    )


SAMPLE_COLUMNS = (
    "card_id",
    "ts",
    "power_draw_w",
    "power_limit_w",
    "temperature_c",
    "memory_temperature_c",
    "memory_used_mib",
    "sm_clock_mhz",
    "clock_event_reasons",
    "pcie_gen",
    "pcie_width",
    "lost",
)


def compile_sample_insert(dialect: Dialect) -> DriverInsertIgnore | None:
    """The driver-level insert for ``samples`` on this dialect (``None``: use Core)."""
    return DriverInsertIgnore.compile(dialect, _SAMPLES, ["card_id", "ts"])


def record_samples(
    session: Session,
    snapshots: Sequence[RigSnapshot],
    known: dict[str, KnownCard],
    fast_insert: DriverInsertIgnore | None = None,
) -> SampleWrite:
    """Write every card of every snapshot as raw samples (one executemany for all).

    A snapshot stored twice (a retried unit of work) is ignored by the key, not an error.
    """
    rows: list[tuple[Any, ...]] = []
    written: dict[str, KnownCard] = {}
    moves: list[CardMove] = []
    for snapshot in snapshots:
        updated, moved = upsert_cards(session, snapshot, known)
        written.update(updated)
        moves.extend(moved)
        ts_us = to_epoch_us(snapshot.taken_at, "snapshot time")
        rows.extend(_sample_row(known[card.uuid].id, ts_us, card) for card in snapshot.cards)
    if fast_insert is not None:
        fast_insert.execute(session, rows)
    else:
        named = [dict(zip(SAMPLE_COLUMNS, row, strict=True)) for row in rows]
        insert_ignore_many(session, _SAMPLES, named, ["card_id", "ts"])
    return SampleWrite(moves=moves, updates=written, rows=len(rows))


def list_cards(session: Session) -> list[CardRow]:
    """Every card ever seen, by current index."""
    return [
        CardRow(
            uuid=row.uuid,
            index=row.card_index,
            pci_bus_id=row.pci_bus_id,
            name=row.name,
            serial=row.serial,
            first_seen=row.first_seen,
            last_seen=row.last_seen,
        )
        for row in session.execute(select(Card).order_by(Card.card_index, Card.id)).scalars()
    ]


def card_id_for_uuid(session: Session, uuid: str) -> int | None:
    """The ``cards.id`` of ``uuid``."""
    found = session.execute(select(Card.id).where(Card.uuid == uuid)).scalar_one_or_none()
    return None if found is None else int(found)


def record_engine_sample(session: Session, sample: EngineSampleRow) -> None:
    """Store one engine-metrics row (a second row for the same time is ignored)."""
    row = {
        "ts": require_aware(sample.ts, "engine sample time"),
        "tokens_per_s": sample.tokens_per_s,
        "requests_running": sample.requests_running,
        "requests_waiting": sample.requests_waiting,
        "kv_cache_usage_pct": sample.kv_cache_usage_pct,
    }
    insert_ignore_many(session, _ENGINE_SAMPLES, [row], ["ts"])


def list_engine_samples(
    session: Session, since: datetime, until: datetime
) -> list[EngineSampleRow]:
    """Engine metrics in ``[since, until)``, oldest first."""
    stmt = (
        select(EngineSample)
        .where(
            EngineSample.ts >= require_aware(since, "since"),
            EngineSample.ts < require_aware(until, "until"),
        )
        .order_by(EngineSample.ts)
    )
    return [
        EngineSampleRow(
            ts=row.ts,
            tokens_per_s=row.tokens_per_s,
            requests_running=row.requests_running,
            requests_waiting=row.requests_waiting,
            kv_cache_usage_pct=row.kv_cache_usage_pct,
        )
        for row in session.execute(stmt).scalars()
    ]
