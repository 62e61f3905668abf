"""Cards, raw samples and engine samples: the per-poll write path, cheap because it runs every second.

The ``cards`` row of each card is written only when something about it changed (new
card, moved slot, renamed) or its ``last_seen`` is more than ``LAST_SEEN_EVERY_S`` old;
otherwise a poll is one batched INSERT of one row per card. ``CardRegistry`` remembers
what is in ``cards`` for that, per ``Store`` (no module state), updated only after the
transaction that wrote it has committed.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Self, cast

from sqlalchemy import Dialect, Engine, Table, select, update
from sqlalchemy.orm import Session

from daemon.store.db import (
    Database,
    DriverInsertIgnore,
    StoreError,
    insert_ignore_many,
    require_aware,
    to_epoch_us,
)
from daemon.store.events import insert_event
from daemon.store.models import Card, EngineSample, Sample, StoredRow
from hwcheck.model import EventKind, GpuSnapshot, RigSnapshot, Severity, normalize_pci_bus_id
from hwcheck.readings import stored_readings
from serving.runtime.engine_figures import STORED_FIGURES
from serving.runtime.engine_metrics import EngineFigures

LAST_SEEN_EVERY_S = 60.0
_SAMPLES: Table = Sample.__table__  # type: ignore[assignment]
_ENGINE_SAMPLES: Table = EngineSample.__table__  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class CardRow(StoredRow):
    """A card the store has seen."""

    uuid: str
    index: int
    pci_bus_id: str
    name: str
    serial: str | None
    first_seen: datetime
    last_seen: datetime


@dataclass(frozen=True, slots=True)
class CardMove(StoredRow):
    """A card (same UUID) found at another PCI address or index than last time."""

    uuid: str
    old_pci_bus_id: str
    new_pci_bus_id: str
    old_index: int
    new_index: int


@dataclass(frozen=True, slots=True)
class EngineSampleRow(StoredRow):
    """Engine metrics at one poll: fleetd's own readings, then the engine's figures.

    ``figures`` holds the stored ones (``serving.runtime.engine_figures.STORED_FIGURES``,
    each an ``engine_samples`` column of the same name); the row's columns and its
    dictionary are flat, as the table is.
    """

    ts: datetime
    tokens_per_s: float | None
    requests_running: int | None
    requests_waiting: int | None
    kv_cache_usage_pct: float | None
    figures: EngineFigures = field(default_factory=EngineFigures)

    @classmethod
    def from_model(cls, model: object) -> Self:
        """The row for an ``EngineSample``: its load columns, then its figure columns."""
        sample = cast(EngineSample, model)
        return cls(
            sample.ts,
            sample.tokens_per_s,
            sample.requests_running,
            sample.requests_waiting,
            sample.kv_cache_usage_pct,
            EngineFigures(**{name: getattr(sample, name) for name in STORED_FIGURES}),
        )

    def to_columns(self) -> dict[str, Any]:
        """The ``engine_samples`` columns, the stored figures flat beside the load."""
        return {
            "ts": self.ts,
            "tokens_per_s": self.tokens_per_s,
            "requests_running": self.requests_running,
            "requests_waiting": self.requests_waiting,
            "kv_cache_usage_pct": self.kv_cache_usage_pct,
            **{name: getattr(self.figures, name) for name in STORED_FIGURES},
        }


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
            index=card.index,
            first_seen=ts,
            last_seen=ts,
        )
        session.add(row)
        session.flush()
        insert_event(
            session,
            EventKind.DAEMON,
            Severity.INFO,
            f"new card {card.uuid} ({card.name}, serial {card.serial or 'unknown'}) "
            f"at {pci} as card {card.index}",
            card=card.index,
            card_uuid=card.uuid,
            pci_bus_id=pci,
            ts=ts,
        )
    else:
        if row.pci_bus_id != pci or row.index != card.index:
            move = CardMove(card.uuid, row.pci_bus_id, pci, row.index, card.index)
            insert_event(
                session,
                EventKind.DAEMON,
                Severity.INFO,
                f"card {card.uuid} moved from {row.pci_bus_id} (card {row.index}) "
                f"to {pci} (card {card.index})",
                card=card.index,
                card_uuid=card.uuid,
                pci_bus_id=pci,
                details={"old_pci_bus_id": row.pci_bus_id, "old_index": row.index},
                ts=ts,
            )
        row.pci_bus_id = pci
        row.index = card.index
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


# ``samples`` column -> the card reading it keeps (``hwcheck.readings``): each column
# after the key must be a declared reading, so a new stored reading is its row there and
# its migration, with no list here to keep in step.
_STORED = stored_readings()
SAMPLE_COLUMNS: tuple[str, ...] = tuple(column.name for column in _SAMPLES.columns)
_KEY_COLUMNS = ("card_id", "ts")
_ROW_READINGS = tuple(_STORED[column].name for column in SAMPLE_COLUMNS[len(_KEY_COLUMNS) :])


def _sample_row(card_id: int, ts_us: int, card: GpuSnapshot) -> tuple[Any, ...]:
    """One ``samples`` row in column order and driver representation (time in epoch µs)."""
    return (card_id, ts_us, *(getattr(card, name) for name in _ROW_READINGS))


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


def card_id_for_uuid(session: Session, uuid: str) -> int | None:
    """The ``cards.id`` of ``uuid``."""
    found = session.execute(select(Card.id).where(Card.uuid == uuid)).scalar_one_or_none()
    return None if found is None else int(found)


class SampleQueries(Database):
    """``Store`` methods for cards, raw samples and engine samples."""

    def __init__(self, read_engine: Engine, write_engine: Engine, url: str) -> None:
        """Per-store caches for the hot path: the known cards, the compiled insert."""
        super().__init__(read_engine, write_engine, url)
        self._cards = CardRegistry()
        self._sample_insert = compile_sample_insert(write_engine.dialect)

    def upsert_cards(self, snapshot: RigSnapshot) -> list[CardMove]:
        """Record the cards of ``snapshot`` (new ones, moved slots); the moves."""
        with self.write() as session:
            # Copied inside the unit: a store started afresh forgot its cards just before.
            written, moves = upsert_cards(session, snapshot, self._cards.copy())
        self._cards.committed(written)
        return moves

    def record_samples(self, snapshot: RigSnapshot) -> list[CardMove]:
        """Store one poll: every card's raw sample (and any card changes); the moves."""
        return self.record_samples_batch([snapshot])

    def record_samples_batch(self, snapshots: Sequence[RigSnapshot]) -> list[CardMove]:
        """Store several polls in one transaction (backfills, benchmarks); the moves."""
        try:
            with self.write() as session:  # the known cards read after the file guard ran
                known = self._cards.copy()
                result = record_samples(session, snapshots, known, self._sample_insert)
        except StoreError:
            self._cards.clear()  # the cache may be ahead of what is committed elsewhere
            raise
        self._cards.committed(result.updates)
        return result.moves

    def list_cards(self) -> list[CardRow]:
        """Every card ever seen, by current index."""
        stmt = select(Card).order_by(Card.index, Card.id)
        with self.read() as session:
            return [CardRow.from_model(row) for row in session.execute(stmt).scalars()]

    def record_engine_sample(
        self,
        ts: datetime,
        tokens_per_s: float | None = None,
        requests_running: int | None = None,
        requests_waiting: int | None = None,
        kv_cache_usage_pct: float | None = None,
        figures: Mapping[str, float | None] | None = None,
    ) -> None:
        """Store the engine's metrics at one poll (a second row for the same time is ignored).

        ``figures`` are the engine's own, by name (the stored ones are kept).
        """
        row = EngineSampleRow(
            require_aware(ts, "engine sample time"),
            tokens_per_s,
            requests_running,
            requests_waiting,
            kv_cache_usage_pct,
            EngineFigures(**{name: (figures or {}).get(name) for name in STORED_FIGURES}),
        )
        with self.write() as session:
            insert_ignore_many(session, _ENGINE_SAMPLES, [row.to_columns()], ["ts"])

    def list_engine_samples(self, since: datetime, until: datetime) -> list[EngineSampleRow]:
        """Engine metrics in ``[since, until)``, oldest first."""
        stmt = (
            select(EngineSample)
            .where(
                EngineSample.ts >= require_aware(since, "since"),
                EngineSample.ts < require_aware(until, "until"),
            )
            .order_by(EngineSample.ts)
        )
        with self.read() as session:
            return [EngineSampleRow.from_model(row) for row in session.execute(stmt).scalars()]
