"""Schema versioning: upgrades keep data, newer schemas are refused, steps are atomic."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, inspect, text

from daemon.store import LATEST_VERSION, MIGRATIONS, Store, StoreError
from daemon.store.db import build_engines
from daemon.store.migrations import Migration, schema_version, upgrade
from daemon.store.models import Base
from hwcheck.kernellog.records import KernelLogCursor
from tests.support.store_rows import T0, UrlFactory, at

T0_US = int(T0.timestamp() * 1_000_000)


def _engine(url: str) -> Engine:
    return build_engines(url).write


def _version_rows(url: str) -> list[int]:
    engine = _engine(url)
    try:
        with engine.connect() as conn:
            return [
                row[0]
                for row in conn.execute(text("SELECT version FROM schema_version ORDER BY version"))
            ]
    finally:
        engine.dispose()


def test_versions_run_one_two_three() -> None:
    assert [step.version for step in MIGRATIONS] == list(range(1, LATEST_VERSION + 1))
    assert LATEST_VERSION >= 2


def test_a_v1_database_with_data_upgrades_keeping_it(store_url: str) -> None:
    engine = _engine(store_url)
    try:
        assert upgrade(engine, target=1) == 1
        with engine.begin() as conn:
            assert not inspect(conn).has_table("rollups_1m")
            conn.execute(
                text(
                    "INSERT INTO cards (id, uuid, serial, name, pci_bus_id, card_index, first_seen, last_seen) "
                    "VALUES (1, 'GPU-old', 'SN1', 'NVIDIA CMP 170HX', '0000:01:00.0', 0, :t, :t)"
                ),
                {"t": T0_US},
            )
            for second, power in ((0, 100.0), (30, 140.0), (60, 90.0)):
                conn.execute(
                    text(
                        "INSERT INTO samples (card_id, ts, power_draw_w, temperature_c, lost) "
                        "VALUES (1, :ts, :power, 55.0, :lost)"
                    ),
                    {"ts": T0_US + second * 1_000_000, "power": power, "lost": False},
                )
            conn.execute(
                text(
                    "INSERT INTO events (ts, kind, severity, card, xid, message, boot_id, kmsg_seq) "
                    "VALUES (:ts, 'xid', 'critical', 0, 79, 'Xid 79 before the upgrade', 'boot-a', 9)"
                ),
                {"ts": T0_US},
            )
            conn.execute(
                text(
                    "INSERT INTO kv (key, value, updated_at) VALUES ('kernel_log_cursor', :v, :t)"
                ),
                {"v": '{"boot_id": "boot-a", "last_seq": 9}', "t": T0_US},
            )
    finally:
        engine.dispose()

    store = Store.open(store_url)
    try:
        assert store.schema_version() == LATEST_VERSION
        (event,) = store.list_events()
        assert (event.xid, event.message, event.ts) == (79, "Xid 79 before the upgrade", T0)
        assert store.get_cursor() == KernelLogCursor("boot-a", 9)
        assert [c.uuid for c in store.list_cards()] == ["GPU-old"]
        report = store.rollup_and_prune(now=at(125))
        assert report.rollup_rows_written == 2
        points = store.chart("GPU-old", at(0), at(120), resolution="1m").points
        assert [(p.n, p.power_draw_w.avg if p.power_draw_w else None) for p in points] == [
            (2, 120.0),
            (1, 90.0),
        ]
    finally:
        store.close()
    assert _version_rows(store_url) == list(range(1, LATEST_VERSION + 1))


def test_a_newer_schema_is_refused_in_one_line(store_url: str) -> None:
    Store.open(store_url).close()
    engine = _engine(store_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO schema_version (version, applied_at, description) VALUES (:v, 0, 'future')"
                ),
                {"v": LATEST_VERSION + 1},
            )
    finally:
        engine.dispose()

    with pytest.raises(StoreError) as caught:
        Store.open(store_url)

    message = str(caught.value)
    assert "\n" not in message
    assert (
        f"schema version {LATEST_VERSION + 1} is newer than this cmpfleet knows ({LATEST_VERSION})"
        in message
    )
    assert message.startswith("store ")


def test_reopening_applies_nothing_twice(store_url: str) -> None:
    Store.open(store_url).close()
    Store.open(store_url).close()
    assert _version_rows(store_url) == list(range(1, LATEST_VERSION + 1))


def test_a_failing_step_leaves_no_trace(store_url: str) -> None:
    def broken(conn: Connection) -> None:
        conn.execute(text("CREATE TABLE half_done (id INTEGER PRIMARY KEY)"))
        raise RuntimeError("step 2 failed halfway")

    steps = (MIGRATIONS[0], Migration(2, "broken", broken))
    engine = _engine(store_url)
    try:
        with pytest.raises(RuntimeError, match="halfway"):
            upgrade(engine, migrations=steps)
        with engine.connect() as conn:
            assert schema_version(conn) == 1
            assert not inspect(conn).has_table("half_done")
    finally:
        engine.dispose()


def test_several_processes_opening_a_new_database_at_once(store_url: str) -> None:
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def open_it() -> None:
        barrier.wait()
        try:
            Store.open(store_url).close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert _version_rows(store_url) == list(range(1, LATEST_VERSION + 1))


def _describe(engine: Engine) -> dict[str, Any]:
    """Everything about the schema that matters, as plain comparable data."""
    insp = inspect(engine)
    described: dict[str, Any] = {}
    for table in sorted(insp.get_table_names()):
        described[table] = {
            "columns": [
                (c["name"], c["type"].compile(dialect=engine.dialect), c["nullable"])
                for c in insp.get_columns(table)
            ],
            "pk": insp.get_pk_constraint(table)["constrained_columns"],
            "indexes": sorted(
                (i["name"], tuple(i["column_names"]), bool(i["unique"]))
                for i in insp.get_indexes(table)
            ),
            "unique": sorted(
                (u["name"], tuple(u["column_names"])) for u in insp.get_unique_constraints(table)
            ),
            "fks": sorted(
                (
                    tuple(f["constrained_columns"]),
                    f["referred_table"],
                    (f.get("options") or {}).get("ondelete"),
                )
                for f in insp.get_foreign_keys(table)
            ),
        }
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            described["without_rowid"] = sorted(
                name
                for name, sql in conn.execute(
                    text("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
                )
                if "WITHOUT ROWID" in (sql or "").upper()
            )
    return described


def test_the_migrated_schema_is_the_models_schema(new_url: UrlFactory) -> None:
    migrated_url, modelled_url = new_url(), new_url()
    Store.open(migrated_url).close()
    modelled = _engine(modelled_url)
    migrated = _engine(migrated_url)
    try:
        Base.metadata.create_all(modelled)
        expected = _describe(modelled)
        actual = _describe(migrated)
    finally:
        modelled.dispose()
        migrated.dispose()

    assert actual == expected
    assert {
        "cards",
        "samples",
        "rollups_1m",
        "engine_samples",
        "events",
        "kv",
        "audit",
        "launches",
    } <= set(actual)
    assert ("uq_events_kind_boot_id_kmsg_seq", ("kind", "boot_id", "kmsg_seq")) in actual["events"][
        "unique"
    ]
    assert actual["samples"]["pk"] == ["card_id", "ts"]
    assert actual["rollups_1m"]["pk"] == ["card_id", "minute"]
    assert ("ix_events_ts", ("ts",), False) in actual["events"]["indexes"]
