"""Builds per engine (issue 42, schema 11): a side engine's builds are its own, the primary's
list (regressions, last good, rollback target) never holds one, and builds stored before
the ``engine`` column read as the primary's after the upgrade."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import text

from daemon.store import Store
from daemon.store.db import build_engines
from daemon.store.migrations import upgrade
from tests.support.store_rows import T0

T0_US = int(T0.timestamp() * 1_000_000)


def facts(key: str, image: str) -> dict[str, Any]:
    return {"key": key, "recipe_hash": f"recipe-{key}", "image": image, "labels": {}}


def test_each_engine_lists_only_its_own_builds(store: Store) -> None:
    primary = store.record_build(facts("a" * 64, "vllm:dsv4"), T0)
    side = store.record_build(facts("b" * 64, "vllm:qwen"), T0 + timedelta(seconds=5), "high")
    assert (primary.engine, side.engine) == (None, "high")
    assert [b.image for b in store.list_builds()] == ["vllm:dsv4"]
    assert [b.image for b in store.list_builds(engine="high")] == ["vllm:qwen"]
    assert store.list_builds(engine="other") == []
    # Seen again: the same build, its engine kept.
    again = store.record_build(facts("b" * 64, "vllm:qwen"), T0 + timedelta(minutes=1), "high")
    assert again.id == side.id and again.engine == "high"


def test_builds_from_before_the_engine_column_read_as_the_primary_engines(store_url: str) -> None:
    engine = build_engines(store_url).write
    try:
        assert upgrade(engine, target=10) == 10
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO builds (build_key, recipe_hash, labels, first_seen, last_seen) "
                    "VALUES (:key, 'r', '{}', :ts, :ts)"
                ),
                {"key": "c" * 64, "ts": T0_US},
            )
    finally:
        engine.dispose()
    store = Store.open(store_url)
    try:
        (row,) = store.list_builds()
        assert (row.build_key, row.engine, row.first_seen) == ("c" * 64, None, T0)
        assert store.list_builds(engine="high") == []
    finally:
        store.close()
