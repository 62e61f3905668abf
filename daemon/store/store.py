"""``Store``: the daemon's one handle on its history, safe to share between threads.

Each public method is one unit of work: it opens a session, does its reads and writes
in one transaction, commits and returns plain dataclasses. Methods that must be atomic
together (an Xid and the kernel-log cursor past it; check states and their transition
events; clearing the latch and its event) are single methods for that reason.

Database failures surface as ``StoreError`` with one line naming the database (password
masked); bad arguments as ``StoreInputError`` (a ``ValueError``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError, StatementError
from sqlalchemy.orm import Session, sessionmaker

from daemon.store import events, history, latch, rollups, samples, state
from daemon.store.engine import build_engines
from daemon.store.errors import StoreError, StoreInputError, mask_url, one_line_cause
from daemon.store.latch import ClearHow
from daemon.store.migrations import schema_version, upgrade
from daemon.store.rows import (
    AuditRow,
    CardMove,
    CardRow,
    Chart,
    ChartResolution,
    EngineSampleRow,
    EventRow,
    Latch,
    LaunchRow,
    XidRecord,
)
from hwcheck.kernellog.records import KernelLogCursor
from hwcheck.model import CheckResult, ClassifiedXid, RigSnapshot


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
        level = None if self.severity is None else events.parse_severity(self.severity)
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


class Store:
    """Events, samples, rollups, latch, launches and audit in one SQL database."""

    def __init__(self, read_engine: Engine, write_engine: Engine, url: str) -> None:
        """Use ``Store.open``; this wires already-migrated engines."""
        self._read_engine = read_engine
        self._write_engine = write_engine
        self._masked_url = mask_url(url)
        self._read_sessions = sessionmaker(read_engine, expire_on_commit=False)
        self._write_sessions = sessionmaker(write_engine, expire_on_commit=False)
        self._cards = samples.CardRegistry()
        self._sample_insert = samples.compile_sample_insert(write_engine.dialect)

    @classmethod
    def open(cls, url: str) -> Store:
        """Connect to ``url``, upgrade its schema to the newest, and return the store."""
        masked = mask_url(url)
        try:
            engines = build_engines(url)
        except StoreError as exc:
            raise StoreError(f"store {masked}: {exc}") from None
        try:
            upgrade(engines.write)
        except StoreError as exc:
            engines.read.dispose()
            raise StoreError(f"store {masked}: {exc}") from None
        except SQLAlchemyError as exc:
            engines.read.dispose()
            raise StoreError(f"store {masked}: {one_line_cause(exc)}") from None
        return cls(engines.read, engines.write, url)

    def close(self) -> None:
        """Release every pooled connection (the store cannot be used afterwards)."""
        self._read_engine.dispose()

    @property
    def url(self) -> str:
        """The database URL with its password masked."""
        return self._masked_url

    @property
    def dialect(self) -> str:
        """``sqlite``, ``postgresql``, ..."""
        return self._read_engine.dialect.name

    @contextmanager
    def _unit(self, factory: sessionmaker[Session]) -> Iterator[Session]:
        try:
            with factory() as session, session.begin():
                yield session
        except StatementError as exc:
            if isinstance(exc.orig, StoreInputError):
                raise exc.orig from None
            raise StoreError(f"store {self._masked_url}: {one_line_cause(exc)}") from exc
        except SQLAlchemyError as exc:
            raise StoreError(f"store {self._masked_url}: {one_line_cause(exc)}") from exc

    def write(self) -> AbstractContextManager[Session]:
        """A write unit of work (``with store.write() as session``), for store modules."""
        return self._unit(self._write_sessions)

    def read(self) -> AbstractContextManager[Session]:
        """A read-only unit of work."""
        return self._unit(self._read_sessions)

    def schema_version(self) -> int:
        """The database's schema version."""
        with self.read() as session:
            return schema_version(session.connection())

    # -- cards and samples -------------------------------------------------------

    def upsert_cards(self, snapshot: RigSnapshot) -> list[CardMove]:
        """Record the cards of ``snapshot`` (new ones, moved slots); the moves."""
        known = self._cards.copy()
        with self.write() as session:
            written, moves = samples.upsert_cards(session, snapshot, known)
        self._cards.committed(written)
        return moves

    def record_samples(self, snapshot: RigSnapshot) -> list[CardMove]:
        """Store one poll: every card's raw sample (and any card changes); the moves."""
        return self.record_samples_batch([snapshot])

    def record_samples_batch(self, snapshots: Sequence[RigSnapshot]) -> list[CardMove]:
        """Store several polls in one transaction (backfills, benchmarks); the moves."""
        known = self._cards.copy()
        try:
            with self.write() as session:
                result = samples.record_samples(session, snapshots, known, self._sample_insert)
        except StoreError:
            self._cards.clear()  # the cache may be ahead of what is committed elsewhere
            raise
        self._cards.committed(result.updates)
        return result.moves

    def list_cards(self) -> list[CardRow]:
        """Every card seen, by current index."""
        with self.read() as session:
            return samples.list_cards(session)

    def record_engine_sample(
        self,
        ts: datetime,
        tokens_per_s: float | None = None,
        requests_running: int | None = None,
        requests_waiting: int | None = None,
        kv_cache_usage_pct: float | None = None,
    ) -> None:
        """Store the engine's metrics at one poll."""
        row = EngineSampleRow(
            ts, tokens_per_s, requests_running, requests_waiting, kv_cache_usage_pct
        )
        with self.write() as session:
            samples.record_engine_sample(session, row)

    def list_engine_samples(self, since: datetime, until: datetime) -> list[EngineSampleRow]:
        """Engine metrics in ``[since, until)``, oldest first."""
        with self.read() as session:
            return samples.list_engine_samples(session, since, until)

    # -- events ------------------------------------------------------------------

    def record_event(
        self,
        kind: str,
        severity: str,
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
        """Store one event; its id."""
        with self.write() as session:
            return events.record_event(
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

    def add_xid_event(self, record: XidRecord) -> bool:
        """Store an Xid event; False when that kernel record was stored before."""
        with self.write() as session:
            return events.add_xid_event(session, record)

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
            new = sum(events.add_xid_event(session, record) for record in records)
            if cursor is not None:
                state.set_cursor(session, cursor)
        return new

    def xids_for_boot(self, boot_id: str, classifier: events.XidClassifier) -> list[ClassifiedXid]:
        """The stored Xids of ``boot_id``, oldest first, classified by ``classifier``."""
        with self.read() as session:
            return events.xids_for_boot(session, boot_id, classifier)

    def list_events(
        self,
        since: datetime | None = None,
        kind: str | None = None,
        limit: int = 100,
        card: int | None = None,
    ) -> list[EventRow]:
        """Events newest first, filtered by time, kind and card."""
        with self.read() as session:
            return events.list_events(session, since, kind, limit, card)

    def get_event(self, event_id: int) -> EventRow | None:
        """One event by id."""
        with self.read() as session:
            return events.get_event(session, event_id)

    def ack_event(self, event_id: int, by: str) -> bool:
        """Acknowledge an event (idempotent); False when there is no such event."""
        with self.write() as session:
            return events.ack_event(session, event_id, by)

    def record_check_transitions(
        self, results: Sequence[CheckResult], now: datetime | None = None
    ) -> list[CheckResult]:
        """Store check severities; record an event per change; return the changed results."""
        with self.write() as session:
            return events.record_check_transitions(session, results, now)

    def check_severities(self) -> dict[str, str]:
        """The stored severity per ``"<check id>:<card index|rig>"``."""
        with self.read() as session:
            return events.check_severities(session)

    # -- small durable values ----------------------------------------------------

    def get_cursor(self) -> KernelLogCursor | None:
        """The kernel-log resume cursor."""
        with self.read() as session:
            return state.get_cursor(session)

    def set_cursor(self, cursor: KernelLogCursor) -> KernelLogCursor:
        """Move the cursor (never backwards within a boot); the cursor in force."""
        with self.write() as session:
            return state.set_cursor(session, cursor)

    def get_boot_id(self) -> str | None:
        """The boot id seen last (another one now means the host rebooted)."""
        with self.read() as session:
            return state.get_boot_id(session)

    def set_boot_id(self, boot_id: str) -> None:
        """Remember the current boot id."""
        with self.write() as session:
            state.set_boot_id(session, boot_id)

    def get_serving_state(self) -> dict[str, Any] | None:
        """The supervisor's last persisted state."""
        with self.read() as session:
            return state.get_serving_state(session)

    def set_serving_state(self, value: dict[str, Any]) -> None:
        """Persist the supervisor's state."""
        with self.write() as session:
            state.set_serving_state(session, value)

    def get_latch(self) -> Latch | None:
        """The reboot-required latch, or ``None``."""
        with self.read() as session:
            return latch.get_latch(session)

    def set_latch(
        self,
        reason: str,
        source: str,
        advice: str | None = None,
        now: datetime | None = None,
    ) -> Latch:
        """Set the reboot-required latch (kept as is when already set); the latch in force."""
        with self.write() as session:
            return latch.set_latch(session, reason, source, advice, now)

    def clear_latch(
        self, reason: str, by: str, how: ClearHow, now: datetime | None = None
    ) -> Latch | None:
        """Clear the latch recording an event; the cleared latch, ``None`` if none was set."""
        with self.write() as session:
            return latch.clear_latch(session, reason, by, how, now)

    def record_boot(self, boot_id: str, now: datetime | None = None) -> str | None:
        """Remember ``boot_id``; a change is a reboot: record it and clear the latch.

        One transaction, so a crash can never store the new boot id while losing the
        reboot event or leaving the latch set for the whole boot. Returns the previous boot
        id when this is a new boot, ``None`` when it is the same boot or the first one.
        """
        with self.write() as session:
            previous = state.get_boot_id(session)
            if previous == boot_id:
                return None
            state.set_boot_id(session, boot_id)
            if previous is None:
                return None
            events.record_event(
                session,
                "reboot",
                "info",
                f"host rebooted (boot id {previous} -> {boot_id})",
                ts=now,
                boot_id=boot_id,
            )
            if latch.get_latch(session) is not None:
                latch.clear_latch(session, "the host rebooted", "fleetd", "reboot", now)
            return previous

    # -- rollups and charts ------------------------------------------------------

    def rollup_and_prune(
        self,
        now: datetime | None = None,
        raw_retention_s: float = rollups.DEFAULT_RAW_RETENTION_S,
        rollup_retention_s: float = rollups.DEFAULT_ROLLUP_RETENTION_S,
        *,
        delete_batch_rows: int = rollups.DELETE_BATCH_ROWS,
    ) -> rollups.PruneReport:
        """Roll complete minutes up, then prune past retention (short batched transactions)."""
        return rollups.rollup_and_prune(
            self.write,
            now or datetime.now(UTC),
            raw_retention_s,
            rollup_retention_s,
            delete_batch_rows,
        )

    def chart(
        self,
        card_uuid: str,
        since: datetime,
        until: datetime,
        resolution: ChartResolution | str = ChartResolution.AUTO,
    ) -> Chart:
        """A card's chart: raw points for short spans, 1-minute min/avg/max for long ones."""
        with self.read() as session:
            return rollups.chart(session, card_uuid, since, until, resolution)

    # -- launches and audit ------------------------------------------------------

    def record_launch(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        recipe_hash: str,
        started_at: datetime | None = None,
    ) -> int:
        """Store a starting launch (secrets masked); its id."""
        with self.write() as session:
            return history.record_launch(session, argv, env, recipe_hash, started_at)

    def update_launch(
        self,
        launch_id: int,
        *,
        ready_at: datetime | None = None,
        ended_at: datetime | None = None,
        exit_code: int | None = None,
        crash_class: str | None = None,
    ) -> bool:
        """Record how a launch went on; False for an unknown id."""
        with self.write() as session:
            return history.update_launch(
                session,
                launch_id,
                ready_at=ready_at,
                ended_at=ended_at,
                exit_code=exit_code,
                crash_class=crash_class,
            )

    def get_launch(self, launch_id: int) -> LaunchRow | None:
        """One launch by id."""
        with self.read() as session:
            return history.get_launch(session, launch_id)

    def last_ready_launch(self) -> LaunchRow | None:
        """The newest launch that became ready."""
        with self.read() as session:
            return history.last_ready_launch(session)

    def list_launches(self, limit: int = 20) -> list[LaunchRow]:
        """The newest launches first."""
        with self.read() as session:
            return history.list_launches(session, limit)

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
        """Append an audit entry; its id."""
        with self.write() as session:
            return history.record_audit(
                session,
                actor,
                action,
                outcome,
                target=target,
                reason=reason,
                dry_run=dry_run,
                details=details,
                ts=ts,
            )

    def list_audit(self, since: datetime | None = None, limit: int = 100) -> list[AuditRow]:
        """Audit entries newest first."""
        with self.read() as session:
            return history.list_audit(session, since, limit)
