"""What the traffic guard is told each tick (``daemon/engine/guard_view.py``).

A real drain keeper over a real store; the engine service is a stand-in with the three
things the view reads (its supervisor's status, its latest launch, its profile).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from daemon.engine.drain import DrainKeeper
from daemon.engine.guard_view import guard_engine_view
from daemon.store import Store
from serving.guard.supervisor import EngineView


@pytest.fixture
def drain(tmp_path: Path) -> Iterator[DrainKeeper]:
    store = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    yield DrainKeeper(store, lambda: "boot-1", 30.0, None, lambda: None)
    store.close()


def engine(launch: object) -> object:
    status = SimpleNamespace(url="http://127.0.0.1:8000", state=SimpleNamespace(value="ready"))
    return SimpleNamespace(
        supervisor=SimpleNamespace(status=lambda: status),
        latest_launch=None if launch is None else (7, launch),
        profile="main",
    )


def test_no_engine_is_no_url_and_a_drain_is_said_all_the_same(drain: DrainKeeper) -> None:
    assert guard_engine_view(None, drain) == EngineView(None, None, None, draining=None)
    drain.drain(None, "ops", "swapping a riser")
    assert guard_engine_view(None, drain).draining == drain.guard_words() is not None


def test_the_engine_its_profile_build_and_slots(drain: DrainKeeper) -> None:
    launch = SimpleNamespace(recipe_hash="abc123", argv=["vllm", "serve", "--max-num-seqs", "12"])
    view = guard_engine_view(engine(launch), drain)
    assert view == EngineView("http://127.0.0.1:8000", "ready", "main", "abc123", 12, None)
    never_launched = guard_engine_view(engine(None), drain)
    assert never_launched == EngineView("http://127.0.0.1:8000", "ready", "main", None, None, None)
