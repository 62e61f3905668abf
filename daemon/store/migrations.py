"""Versioned schema migrations: a ``schema_version`` table and an ordered tuple of steps.

Why not Alembic: it is not a runtime dependency of cmpfleet, and its script directory,
``env.py`` and ini file would have to ship as package data and be driven from code at
every daemon start. The schema is small and owned by one program, so a tuple of plain
functions is enough: each step runs in its own transaction (DDL is transactional on
both SQLite and PostgreSQL), records its version in the same transaction, and so either
happens completely or not at all. Steps are frozen history: they define their tables
with Core here and never import the models, which describe only the newest schema.

Opening a database newer than the code refuses instead of guessing (a downgrade of
cmpfleet must not scribble on a schema it does not understand).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Engine,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    insert,
    select,
    text,
)

from daemon.store.coltypes import UtcTimestamp, json_type
from daemon.store.db import NAMING_CONVENTION, StoreError

# Any constant works: it only has to be the same for every cmpfleet process.
_PG_MIGRATION_LOCK_KEY = 0x636D70666C74  # "cmpflt"


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: ``apply`` takes the schema from ``version - 1`` to ``version``."""

    version: int
    description: str
    apply: Callable[[Connection], None]


def _metadata() -> MetaData:
    return MetaData(naming_convention=dict(NAMING_CONVENTION))


def _version_table(metadata: MetaData) -> Table:
    return Table(
        "schema_version",
        metadata,
        Column("version", Integer, primary_key=True, autoincrement=False),
        Column("applied_at", UtcTimestamp, nullable=False),
        Column("description", String(200), nullable=False),
    )


def _cards_stub(metadata: MetaData) -> Table:
    """Just enough of ``cards`` for later steps' foreign keys to resolve."""
    return Table("cards", metadata, Column("id", Integer, primary_key=True))


def _v1_initial(conn: Connection) -> None:
    """Cards, raw samples, events, small durable values, audit trail and launches."""
    md = _metadata()
    Table(
        "cards",
        md,
        Column("id", Integer, primary_key=True),
        Column("uuid", String(64), nullable=False, unique=True),
        Column("serial", String(64)),
        Column("name", String(128), nullable=False),
        Column("pci_bus_id", String(16), nullable=False),
        Column("card_index", Integer, nullable=False),
        Column("first_seen", UtcTimestamp, nullable=False),
        Column("last_seen", UtcTimestamp, nullable=False),
    )
    Table(
        "samples",
        md,
        Column(
            "card_id",
            Integer,
            ForeignKey("cards.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        Column("ts", UtcTimestamp, primary_key=True),
        Column("power_draw_w", Float),
        Column("power_limit_w", Float),
        Column("temperature_c", Float),
        Column("memory_temperature_c", Float),
        Column("memory_used_mib", Integer),
        Column("sm_clock_mhz", Integer),
        Column("clock_event_reasons", BigInteger),
        Column("pcie_gen", SmallInteger),
        Column("pcie_width", SmallInteger),
        Column("lost", Boolean, nullable=False),
        sqlite_with_rowid=False,
    )
    Table(
        "events",
        md,
        Column("id", Integer, primary_key=True),
        Column("ts", UtcTimestamp, nullable=False),
        Column("kind", String(16), nullable=False),
        Column("severity", String(16), nullable=False),
        Column("card", Integer),
        Column("card_uuid", String(64)),
        Column("card_serial", String(64)),
        Column("pci_bus_id", String(16)),
        Column("xid", Integer),
        Column("message", Text, nullable=False),
        Column("details", json_type()),
        Column("boot_id", String(64)),
        Column("kmsg_seq", BigInteger),
        Column("acked_at", UtcTimestamp),
        Column("acked_by", String(128)),
        UniqueConstraint("kind", "boot_id", "kmsg_seq"),
        Index(None, "ts"),
    )
    Table(
        "kv",
        md,
        Column("key", String(64), primary_key=True),
        Column("value", json_type(), nullable=False),
        Column("updated_at", UtcTimestamp, nullable=False),
    )
    Table(
        "audit",
        md,
        Column("id", Integer, primary_key=True),
        Column("ts", UtcTimestamp, nullable=False),
        Column("actor", String(64), nullable=False),
        Column("action", String(64), nullable=False),
        Column("target", String(128)),
        Column("reason", Text),
        Column("dry_run", Boolean, nullable=False),
        Column("outcome", String(64), nullable=False),
        Column("details", json_type()),
        Index(None, "ts"),
    )
    Table(
        "launches",
        md,
        Column("id", Integer, primary_key=True),
        Column("started_at", UtcTimestamp, nullable=False),
        Column("ready_at", UtcTimestamp),
        Column("ended_at", UtcTimestamp),
        Column("argv", json_type(), nullable=False),
        Column("env", json_type(), nullable=False),
        Column("recipe_hash", String(128), nullable=False),
        Column("exit_code", Integer),
        Column("crash_class", String(64)),
    )
    md.create_all(conn)


def _v2_rollups(conn: Connection) -> None:
    """Per-card 1-minute min/avg/max rollups, so charts outlive the raw window."""
    md = _metadata()
    _cards_stub(md)
    stats = [
        Column(f"{metric}_{stat}", Float)
        for metric in ("power_draw_w", "temperature_c", "sm_clock_mhz", "memory_used_mib")
        for stat in ("min", "avg", "max")
    ]
    rollups = Table(
        "rollups_1m",
        md,
        Column(
            "card_id",
            Integer,
            ForeignKey("cards.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        Column("minute", UtcTimestamp, primary_key=True),
        Column("n", Integer, nullable=False),
        *stats,
        sqlite_with_rowid=False,
    )
    rollups.create(conn)


def _v3_engine_samples(conn: Connection) -> None:
    """Rig-level engine metrics (tokens/s, queue, KV cache use) per poll."""
    md = _metadata()
    engine_samples = Table(
        "engine_samples",
        md,
        Column("ts", UtcTimestamp, primary_key=True),
        Column("tokens_per_s", Float),
        Column("requests_running", Integer),
        Column("requests_waiting", Integer),
        Column("kv_cache_usage_pct", Float),
    )
    engine_samples.create(conn)


def _v4_alerts(conn: Connection) -> None:
    """Alerts (one row per incident, folded by fingerprint) and their delivery outbox."""
    md = _metadata()
    Table(
        "alerts",
        md,
        Column("id", Integer, primary_key=True),
        Column("fingerprint", String(200), nullable=False),
        Column("rule", String(64), nullable=False),
        Column("severity", String(16), nullable=False),
        Column("status", String(16), nullable=False),
        Column("summary", Text, nullable=False),
        Column("advice", Text, nullable=False),
        Column("labels", json_type(), nullable=False),
        Column("count", Integer, nullable=False),
        Column("one_shot", Boolean, nullable=False),
        Column("started_at", UtcTimestamp, nullable=False),
        Column("last_seen_at", UtcTimestamp, nullable=False),
        Column("notified_at", UtcTimestamp),
        Column("resolve_due_at", UtcTimestamp),
        Column("resolved_at", UtcTimestamp),
        Index(None, "fingerprint", "status"),
        Index(None, "started_at"),
    )
    Table(
        "alert_notifications",
        md,
        Column("id", Integer, primary_key=True),
        Column("uid", String(64), nullable=False, unique=True),
        Column("alert_id", Integer, ForeignKey("alerts.id", ondelete="CASCADE"), nullable=False),
        Column("sink", String(64), nullable=False),
        Column("status", String(16), nullable=False),
        Column("repeat", Boolean, nullable=False),
        Column("payload", json_type(), nullable=False),
        Column("created_at", UtcTimestamp, nullable=False),
        Column("attempts", Integer, nullable=False),
        Column("last_error", Text),
        Column("last_try_at", UtcTimestamp),
        Column("delivered_at", UtcTimestamp),
        Column("gave_up_at", UtcTimestamp),
        Index(None, "sink", "delivered_at", "gave_up_at", "id"),
        Index(None, "alert_id"),
    )
    md.create_all(conn)


def _v5_canaries(conn: Connection) -> None:
    """Engine canary results per round and engine log-signature counts per hour."""
    md = _metadata()
    Table(
        "canary_results",
        md,
        Column("id", Integer, primary_key=True),
        Column("ts", UtcTimestamp, nullable=False),
        Column("name", String(48), nullable=False),
        Column("result", String(16), nullable=False),
        Column("figure", Float),
        Column("unit", String(16), nullable=False),
        Column("message", Text, nullable=False),
        Column("advice", Text, nullable=False),
        Column("duration_s", Float, nullable=False),
        Column("details", json_type()),
        Index(None, "name", "ts"),
    )
    Table(
        "log_signature_counts",
        md,
        Column("hour", UtcTimestamp, primary_key=True),
        Column("signature", String(48), primary_key=True),
        Column("count", Integer, nullable=False),
    )
    md.create_all(conn)


# Frozen with step 6 (steps are history): a figure added later is a later step's column,
# so this list is not ``serving.runtime.engine_figures.STORED_FIGURES``, which follows the model.
ENGINE_FIGURE_COLUMNS = (
    "ttft_p50_s",
    "ttft_p95_s",
    "itl_p50_s",
    "itl_p95_s",
    "spec_acceptance_ratio",
    "spec_mean_accepted_tokens",
    "prefix_cache_hit_ratio",
    "preemptions_total",
)


def _add_column(conn: Connection, table: str, column: Column[Any]) -> None:
    """``ALTER TABLE ... ADD COLUMN`` (nullable, no default: both dialects, no rewrite)."""
    kind = column.type.compile(dialect=conn.dialect)
    conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column.name} {kind}"))


def _v6_builds(conn: Connection) -> None:
    """Engine builds (what ran), launches and canary results per build, engine figures."""
    md = _metadata()
    Table(
        "builds",
        md,
        Column("id", Integer, primary_key=True),
        Column("build_key", String(64), nullable=False, unique=True),
        Column("recipe_hash", String(128), nullable=False),
        Column("image", String(300)),
        Column("image_id", String(128)),
        Column("image_digest", String(300)),
        Column("engine_version", String(128)),
        Column("labels", json_type(), nullable=False),
        Column("provenance_output", Text),
        Column("notes", json_type()),
        Column("first_seen", UtcTimestamp, nullable=False),
        Column("last_seen", UtcTimestamp, nullable=False),
    )
    md.create_all(conn)
    _add_column(conn, "launches", Column("build_id", Integer))
    _add_column(conn, "canary_results", Column("build_id", Integer))
    canary_results = Table("canary_results", md, Column("build_id", Integer))
    Index(None, canary_results.c.build_id).create(conn)
    for name in ENGINE_FIGURE_COLUMNS:
        _add_column(conn, "engine_samples", Column(name, Float))


def _v7_utilization(conn: Connection) -> None:
    """GPU utilisation per raw sample and its 1-minute min/avg/max (what nvitop charts)."""
    columns = [("samples", "utilization_gpu_pct", "SMALLINT")] + [
        ("rollups_1m", f"utilization_gpu_pct_{stat}", "FLOAT") for stat in ("min", "avg", "max")
    ]
    for table, column, kind in columns:
        # A nullable column with no default: both databases add it without a table rewrite.
        conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {kind}"))


def _v8_bench_runs(conn: Connection) -> None:
    """Bench runs (``fleetctl bench``): method, cells, sweep and verdict, per build."""
    md = _metadata()
    Table(
        "bench_runs",
        md,
        Column("id", Integer, primary_key=True),
        Column("kind", String(16), nullable=False),
        Column("state", String(16), nullable=False),
        Column("quick", Boolean, nullable=False),
        Column("actor", String(64), nullable=False),
        Column("build_id", Integer, index=True),
        Column("build_name", String(200)),
        Column("started_at", UtcTimestamp, nullable=False, index=True),
        Column("finished_at", UtcTimestamp),
        Column("method", json_type(), nullable=False),
        Column("cells", json_type(), nullable=False),
        Column("sweep", json_type()),
        Column("verdict", json_type()),
        Column("error", Text),
    )
    md.create_all(conn)


def _v9_launch_engine(conn: Connection) -> None:
    """The engine each launch was of, on a rig of several (``[serving] run``).

    NULL is the primary, so every launch stored before reads as the primary's, as it was.
    """
    _add_column(conn, "launches", Column("engine", String(64)))
    launches = Table("launches", _metadata(), Column("engine", String(64)))
    Index(None, launches.c.engine).create(conn)


def _v10_canary_engine(conn: Connection) -> None:
    """Canary results per engine (a side engine's profile; NULL: the primary engine's).

    NULL for the primary, so every row written before reads as the primary's.
    """
    _add_column(conn, "canary_results", Column("engine", String(64)))


def _v11_build_engine(conn: Connection) -> None:
    """Builds per engine: a side engine's provenance beside the primary's, never mixed.

    NULL for the primary, so every build recorded before reads as the primary's (its
    regressions, last good build and rollback target stay among its own builds).
    """
    _add_column(conn, "builds", Column("engine", String(64)))


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", _v1_initial),
    Migration(2, "1-minute rollups", _v2_rollups),
    Migration(3, "engine samples", _v3_engine_samples),
    Migration(4, "alerts and their delivery outbox", _v4_alerts),
    Migration(5, "canary results and log signature counts", _v5_canaries),
    Migration(6, "engine builds and the engine's own figures", _v6_builds),
    Migration(7, "GPU utilisation in samples and rollups", _v7_utilization),
    Migration(8, "bench runs", _v8_bench_runs),
    Migration(9, "the engine of each launch", _v9_launch_engine),
    Migration(10, "canary results per engine", _v10_canary_engine),
    Migration(11, "builds per engine", _v11_build_engine),
)
LATEST_VERSION = MIGRATIONS[-1].version


def schema_version(conn: Connection) -> int:
    """The newest applied migration, 0 for an empty database."""
    if not conn.dialect.has_table(conn, "schema_version"):
        return 0
    version_table = _version_table(_metadata())
    found = conn.execute(select(func.max(version_table.c.version))).scalar()
    return int(found or 0)


def upgrade(
    engine: Engine,
    target: int | None = None,
    migrations: Sequence[Migration] = MIGRATIONS,
) -> int:
    """Apply every missing step up to ``target`` (default: all), one transaction each.

    Returns the version reached. Several processes may open the same database at once:
    SQLite serialises the steps through ``BEGIN IMMEDIATE`` (the engine's write
    transactions), PostgreSQL through a transaction-scoped advisory lock; each step
    re-reads the version under that lock. ``migrations`` is for tests of the mechanism.
    """
    latest = len(migrations)
    if [step.version for step in migrations] != list(range(1, latest + 1)):
        raise StoreError("migration versions must run 1, 2, 3... without gaps")
    target = latest if target is None else target
    if not 0 <= target <= latest:
        raise StoreError(f"no schema version {target}: this cmpfleet knows 0..{latest}")
    while True:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK_KEY}
                )
            version_table = _version_table(_metadata())
            version_table.create(conn, checkfirst=True)
            current = schema_version(conn)
            if current > latest:
                raise StoreError(
                    f"schema version {current} is newer than this cmpfleet knows "
                    f"({latest}): upgrade cmpfleet or use another database"
                )
            if current >= target:
                return current
            step = migrations[current]
            step.apply(conn)
            conn.execute(
                insert(version_table).values(
                    version=step.version,
                    applied_at=datetime.now(UTC),
                    description=step.description,
                )
            )
