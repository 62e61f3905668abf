"""Canary results per engine (issue 42): a side engine's rows are its own, the primary's
read as with one engine, and rows stored before the ``engine`` column read as the
primary's after the upgrade."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import text

from daemon.store import Store
from daemon.store.db import build_engines
from daemon.store.migrations import upgrade
from tests.support.store_rows import T0

T0_US = int(T0.timestamp() * 1_000_000)


def result(name: str, outcome: str, ts: datetime) -> dict[str, Any]:
    return {"ts": ts, "name": name, "result": outcome, "figure": None, "message": outcome}


def test_each_engine_reads_only_its_own_canary_rows(store: Store) -> None:
    store.record_canary_results([result("copy_fidelity", "pass", T0)])
    side = store.record_canary_results(
        [
            result("copy_fidelity", "fail", T0 + timedelta(seconds=1)),
            result("tool_calls", "skipped", T0 + timedelta(seconds=2)),
        ],
        engine="high",
    )
    assert [row.engine for row in side] == ["high", "high"]
    primary = store.latest_canary_results()
    assert {name: row.result for name, row in primary.items()} == {"copy_fidelity": "pass"}
    assert primary["copy_fidelity"].engine is None
    high = store.latest_canary_results(engine="high")
    assert {name: row.result for name, row in high.items()} == {
        "copy_fidelity": "fail",
        "tool_calls": "skipped",
    }
    assert set(store.latest_canary_results(judged_only=True, engine="high")) == {"copy_fidelity"}
    assert [row.result for row in store.list_canary_results()] == ["pass"]
    assert [row.result for row in store.list_canary_results(engine="high")] == ["skipped", "fail"]
    assert store.latest_canary_results(engine="other") == {}


def test_rows_from_before_the_engine_column_read_as_the_primary_engines(store_url: str) -> None:
    engine = build_engines(store_url).write
    try:
        assert upgrade(engine, target=8) == 8
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO canary_results (ts, name, result, unit, message, advice, "
                    "duration_s) VALUES (:ts, 'throughput', 'pass', 'tok/s', 'old', '', 1.0)"
                ),
                {"ts": T0_US},
            )
    finally:
        engine.dispose()
    store = Store.open(store_url)
    try:
        (row,) = store.latest_canary_results().values()
        assert (row.name, row.message, row.engine, row.ts) == ("throughput", "old", None, T0)
        assert store.latest_canary_results(engine="high") == {}
    finally:
        store.close()
