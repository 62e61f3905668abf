"""The ORM tables (the schema as of the newest migration) and the base of the row types.

The database itself is only ever created by ``migrations.py`` (frozen, versioned DDL);
these models are what queries are written against. A test builds a database from these
models and one through every migration and requires the two to match.

Samples and rollups point at ``cards.id`` (a small integer) instead of repeating the
40-character NVML UUID in every row and index entry: that alone keeps a 48 h raw window
of 8 cards at 1 Hz well under the size budget. On SQLite both are ``WITHOUT ROWID``
tables clustered on their natural key ``(card_id, ts)``, so the hot "one card over a
time span" query reads contiguous pages and needs no second index.

``StoredRow`` is the base of the plain rows the store hands out: a frozen dataclass
named like its table's columns, built once from the ORM object, serialised one way.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import fields
from datetime import datetime
from typing import Any, Self, cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, configure_mappers, mapped_column

from daemon.store.coltypes import EnumText, UtcTimestamp, json_type
from daemon.store.db import NAMING_CONVENTION
from hwcheck.model import EventKind, Severity


class Base(DeclarativeBase):
    """Declarative base with the shared naming convention."""

    metadata = MetaData(naming_convention=dict(NAMING_CONVENTION))


class SchemaVersion(Base):
    """One row per applied migration; the newest ``version`` is the schema's."""

    __tablename__ = "schema_version"

    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    applied_at: Mapped[datetime] = mapped_column(UtcTimestamp)
    description: Mapped[str] = mapped_column(String(200))


class Card(Base):
    """A card seen on this rig, identified by its NVML UUID (which survives slot moves)."""

    __tablename__ = "cards"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(String(64), unique=True)
    serial: Mapped[str | None] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(128))
    pci_bus_id: Mapped[str] = mapped_column(String(16))
    index: Mapped[int] = mapped_column("card_index", Integer)
    first_seen: Mapped[datetime] = mapped_column(UtcTimestamp)
    last_seen: Mapped[datetime] = mapped_column(UtcTimestamp)


class Sample(Base):
    """One card at one poll (raw, kept for the raw retention window)."""

    __tablename__ = "samples"
    __table_args__ = {"sqlite_with_rowid": False}

    card_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("cards.id", ondelete="CASCADE"), primary_key=True
    )
    ts: Mapped[datetime] = mapped_column(UtcTimestamp, primary_key=True)
    power_draw_w: Mapped[float | None] = mapped_column(Float)
    power_limit_w: Mapped[float | None] = mapped_column(Float)
    temperature_c: Mapped[float | None] = mapped_column(Float)
    memory_temperature_c: Mapped[float | None] = mapped_column(Float)
    memory_used_mib: Mapped[int | None] = mapped_column(Integer)
    sm_clock_mhz: Mapped[int | None] = mapped_column(Integer)
    clock_event_reasons: Mapped[int | None] = mapped_column(BigInteger)
    pcie_gen: Mapped[int | None] = mapped_column(SmallInteger)
    pcie_width: Mapped[int | None] = mapped_column(SmallInteger)
    lost: Mapped[bool] = mapped_column(Boolean)
    utilization_gpu_pct: Mapped[int | None] = mapped_column(SmallInteger)


class Rollup1m(Base):
    """One card over one complete minute: min/avg/max of the charted metrics."""

    __tablename__ = "rollups_1m"
    __table_args__ = {"sqlite_with_rowid": False}

    card_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("cards.id", ondelete="CASCADE"), primary_key=True
    )
    minute: Mapped[datetime] = mapped_column(UtcTimestamp, primary_key=True)
    n: Mapped[int] = mapped_column(Integer)
    power_draw_w_min: Mapped[float | None] = mapped_column(Float)
    power_draw_w_avg: Mapped[float | None] = mapped_column(Float)
    power_draw_w_max: Mapped[float | None] = mapped_column(Float)
    temperature_c_min: Mapped[float | None] = mapped_column(Float)
    temperature_c_avg: Mapped[float | None] = mapped_column(Float)
    temperature_c_max: Mapped[float | None] = mapped_column(Float)
    sm_clock_mhz_min: Mapped[float | None] = mapped_column(Float)
    sm_clock_mhz_avg: Mapped[float | None] = mapped_column(Float)
    sm_clock_mhz_max: Mapped[float | None] = mapped_column(Float)
    memory_used_mib_min: Mapped[float | None] = mapped_column(Float)
    memory_used_mib_avg: Mapped[float | None] = mapped_column(Float)
    memory_used_mib_max: Mapped[float | None] = mapped_column(Float)
    utilization_gpu_pct_min: Mapped[float | None] = mapped_column(Float)
    utilization_gpu_pct_avg: Mapped[float | None] = mapped_column(Float)
    utilization_gpu_pct_max: Mapped[float | None] = mapped_column(Float)


class EngineSample(Base):
    """Rig-level engine metrics at one poll; any figure the engine did not give is NULL."""

    __tablename__ = "engine_samples"

    ts: Mapped[datetime] = mapped_column(UtcTimestamp, primary_key=True)
    tokens_per_s: Mapped[float | None] = mapped_column(Float)
    requests_running: Mapped[int | None] = mapped_column(Integer)
    requests_waiting: Mapped[int | None] = mapped_column(Integer)
    kv_cache_usage_pct: Mapped[float | None] = mapped_column(Float)
    # The engine's own figures over its metrics window (``serving.runtime.engine_metrics``).
    ttft_p50_s: Mapped[float | None] = mapped_column(Float)
    ttft_p95_s: Mapped[float | None] = mapped_column(Float)
    itl_p50_s: Mapped[float | None] = mapped_column(Float)
    itl_p95_s: Mapped[float | None] = mapped_column(Float)
    spec_acceptance_ratio: Mapped[float | None] = mapped_column(Float)
    spec_mean_accepted_tokens: Mapped[float | None] = mapped_column(Float)
    prefix_cache_hit_ratio: Mapped[float | None] = mapped_column(Float)
    preemptions_total: Mapped[float | None] = mapped_column(Float)


class Event(Base):
    """Something that happened (Xid, check transition, serving, recovery, operator...).

    The unique key on ``(kind, boot_id, kmsg_seq)`` makes inserting the same kernel
    record twice a no-op; other events leave ``boot_id``/``kmsg_seq`` NULL, and NULLs
    never collide.
    """

    __tablename__ = "events"
    __table_args__ = (
        UniqueConstraint("kind", "boot_id", "kmsg_seq"),
        Index(None, "ts"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    ts: Mapped[datetime] = mapped_column(UtcTimestamp)
    kind: Mapped[EventKind] = mapped_column(EnumText(EventKind, 16))
    severity: Mapped[Severity] = mapped_column(EnumText(Severity, 16))
    card: Mapped[int | None] = mapped_column(Integer)
    card_uuid: Mapped[str | None] = mapped_column(String(64))
    card_serial: Mapped[str | None] = mapped_column(String(64))
    pci_bus_id: Mapped[str | None] = mapped_column(String(16))
    xid: Mapped[int | None] = mapped_column(Integer)
    message: Mapped[str] = mapped_column(Text)
    details: Mapped[dict[str, Any] | None] = mapped_column(json_type())
    boot_id: Mapped[str | None] = mapped_column(String(64))
    kmsg_seq: Mapped[int | None] = mapped_column(BigInteger)
    acked_at: Mapped[datetime | None] = mapped_column(UtcTimestamp)
    acked_by: Mapped[str | None] = mapped_column(String(128))


class KvEntry(Base):
    """A small durable value (kernel-log cursor, boot id, latch, check states...)."""

    __tablename__ = "kv"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[Any] = mapped_column(json_type())
    updated_at: Mapped[datetime] = mapped_column(UtcTimestamp)


class AuditEntry(Base):
    """Who did (or, in dry-run, would have done) what, to what, why, and how it went."""

    __tablename__ = "audit"
    __table_args__ = (Index(None, "ts"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    ts: Mapped[datetime] = mapped_column(UtcTimestamp)
    actor: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str | None] = mapped_column(String(128))
    reason: Mapped[str | None] = mapped_column(Text)
    dry_run: Mapped[bool] = mapped_column(Boolean)
    outcome: Mapped[str] = mapped_column(String(64))
    details: Mapped[dict[str, Any] | None] = mapped_column(json_type())


class Launch(Base):
    """One engine launch: exactly what ran (secrets masked) and how it ended."""

    __tablename__ = "launches"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    started_at: Mapped[datetime] = mapped_column(UtcTimestamp)
    ready_at: Mapped[datetime | None] = mapped_column(UtcTimestamp)
    ended_at: Mapped[datetime | None] = mapped_column(UtcTimestamp)
    argv: Mapped[list[str]] = mapped_column(json_type())
    env: Mapped[dict[str, str]] = mapped_column(json_type())
    recipe_hash: Mapped[str] = mapped_column(String(128))
    exit_code: Mapped[int | None] = mapped_column(Integer)
    crash_class: Mapped[str | None] = mapped_column(String(64))
    build_id: Mapped[int | None] = mapped_column(Integer)
    # The side engine's profile on a rig of several engines; NULL: the primary engine.
    engine: Mapped[str | None] = mapped_column(String(64), index=True)


class Build(Base):
    """An engine build: what a launch ran (recipe hash, image ID and digest, version, labels).

    ``build_key`` is the hash of those facts (``serving.runtime.provenance``): the same
    facts seen again update ``last_seen``; different ones are a new build.
    """

    __tablename__ = "builds"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    build_key: Mapped[str] = mapped_column(String(64), unique=True)
    recipe_hash: Mapped[str] = mapped_column(String(128))
    image: Mapped[str | None] = mapped_column(String(300))
    image_id: Mapped[str | None] = mapped_column(String(128))
    image_digest: Mapped[str | None] = mapped_column(String(300))
    engine_version: Mapped[str | None] = mapped_column(String(128))
    labels: Mapped[dict[str, str]] = mapped_column(json_type())
    provenance_output: Mapped[str | None] = mapped_column(Text)
    notes: Mapped[list[str] | None] = mapped_column(json_type())
    first_seen: Mapped[datetime] = mapped_column(UtcTimestamp)
    last_seen: Mapped[datetime] = mapped_column(UtcTimestamp)
    # The side engine's profile that ran it (``[serving] run``); NULL: the primary engine.
    engine: Mapped[str | None] = mapped_column(String(64))


class BenchRun(Base):
    """One bench run (``fleetctl bench``): its method, its cells, its verdict, its build.

    ``kind`` is ``matrix`` or ``sweep``; ``state`` ``running``, ``done``, ``stopped`` (Ctrl-C:
    the finished cells kept) or ``failed``. Listed per build (``build_id``).
    """

    __tablename__ = "bench_runs"
    __table_args__ = (Index(None, "build_id"), Index(None, "started_at"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16))
    quick: Mapped[bool] = mapped_column(Boolean)
    actor: Mapped[str] = mapped_column(String(64))
    build_id: Mapped[int | None] = mapped_column(Integer)
    build_name: Mapped[str | None] = mapped_column(String(200))
    started_at: Mapped[datetime] = mapped_column(UtcTimestamp)
    finished_at: Mapped[datetime | None] = mapped_column(UtcTimestamp)
    method: Mapped[dict[str, Any]] = mapped_column(json_type())
    cells: Mapped[list[dict[str, Any]]] = mapped_column(json_type())
    sweep: Mapped[dict[str, Any] | None] = mapped_column(json_type())
    verdict: Mapped[dict[str, Any] | None] = mapped_column(json_type())
    error: Mapped[str | None] = mapped_column(Text)


class Alert(Base):
    """One incident: a fingerprint that fired (its duplicates folded in) until it resolved."""

    __tablename__ = "alerts"
    __table_args__ = (Index(None, "fingerprint", "status"), Index(None, "started_at"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(200))
    rule: Mapped[str] = mapped_column(String(64))
    severity: Mapped[Severity] = mapped_column(EnumText(Severity, 16))
    status: Mapped[str] = mapped_column(String(16))
    summary: Mapped[str] = mapped_column(Text)
    advice: Mapped[str] = mapped_column(Text)
    labels: Mapped[dict[str, Any]] = mapped_column(json_type())
    count: Mapped[int] = mapped_column(Integer)
    one_shot: Mapped[bool] = mapped_column(Boolean)
    started_at: Mapped[datetime] = mapped_column(UtcTimestamp)
    last_seen_at: Mapped[datetime] = mapped_column(UtcTimestamp)
    notified_at: Mapped[datetime | None] = mapped_column(UtcTimestamp)
    resolve_due_at: Mapped[datetime | None] = mapped_column(UtcTimestamp)
    resolved_at: Mapped[datetime | None] = mapped_column(UtcTimestamp)


class AlertNotification(Base):
    """The outbox: one message about one alert for one sink, kept until a 2xx (or too old)."""

    __tablename__ = "alert_notifications"
    __table_args__ = (
        Index(None, "sink", "delivered_at", "gave_up_at", "id"),
        Index(None, "alert_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uid: Mapped[str] = mapped_column(String(64), unique=True)
    alert_id: Mapped[int] = mapped_column(Integer, ForeignKey("alerts.id", ondelete="CASCADE"))
    sink: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    repeat: Mapped[bool] = mapped_column(Boolean)
    payload: Mapped[dict[str, Any]] = mapped_column(json_type())
    created_at: Mapped[datetime] = mapped_column(UtcTimestamp)
    attempts: Mapped[int] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    last_try_at: Mapped[datetime | None] = mapped_column(UtcTimestamp)
    delivered_at: Mapped[datetime | None] = mapped_column(UtcTimestamp)
    gave_up_at: Mapped[datetime | None] = mapped_column(UtcTimestamp)


class CanaryRun(Base):
    """One canary's result in one round (the history behind ``fleetctl canary status``)."""

    __tablename__ = "canary_results"
    __table_args__ = (Index(None, "name", "ts"), Index(None, "build_id"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    ts: Mapped[datetime] = mapped_column(UtcTimestamp)
    name: Mapped[str] = mapped_column(String(48))
    result: Mapped[str] = mapped_column(String(16))
    figure: Mapped[float | None] = mapped_column(Float)
    unit: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text)
    advice: Mapped[str] = mapped_column(Text)
    duration_s: Mapped[float] = mapped_column(Float)
    details: Mapped[dict[str, Any] | None] = mapped_column(json_type())
    build_id: Mapped[int | None] = mapped_column(Integer)  # the build the verdict judged
    # The side engine's profile it judged (``[serving] run``); NULL: the primary engine.
    engine: Mapped[str | None] = mapped_column(String(64))


class LogSignatureCount(Base):
    """How often one engine log signature was seen in one hour."""

    __tablename__ = "log_signature_counts"

    hour: Mapped[datetime] = mapped_column(UtcTimestamp, primary_key=True)
    signature: Mapped[str] = mapped_column(String(48), primary_key=True)
    count: Mapped[int] = mapped_column(Integer)


# -- rows ---------------------------------------------------------------------------


# The mappers are configured here, once, when the schema is imported, not by the first query
# that needs them: that query (the first read at fleetd's start) otherwise pays some 0.3 s of
# CPU for it, and a mapping error shows up at import rather than under a request.
configure_mappers()


def json_value(value: Any) -> Any:
    """``value`` as JSON-ready data: ISO 8601 times, enum values, rows as dicts."""
    if isinstance(value, StoredRow):
        return value.to_dict()
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(key): json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(item) for item in value]
    return value


class StoredRow:
    """Base of the store's row types: frozen dataclasses named like their ORM columns.

    A row is built once from its ORM object (``from_model``: same field names, no
    hand-copying) and serialises through one path (``to_dict``), so the API, the CLI and
    pydantic response models (``from_attributes``) all read the same type.
    """

    __slots__ = ()

    @classmethod
    def from_model(cls, model: object) -> Self:
        """The row for ``model``, an ORM object with an attribute per field."""
        values = {field.name: getattr(model, field.name) for field in fields(cast(Any, cls))}
        return cls(**values)

    def to_columns(self) -> dict[str, Any]:
        """Every field as is, by name: the values to insert into its table."""
        return {field.name: getattr(self, field.name) for field in fields(cast(Any, self))}

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (times in ISO 8601 with their offset)."""
        return {key: json_value(value) for key, value in self.to_columns().items()}
