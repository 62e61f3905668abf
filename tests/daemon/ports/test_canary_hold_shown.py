"""A canary hold (``stop_and_hold``) is one of the status's ``recovery.decisions``.

Real store (SQLite) and the real audit port: the row is written as recovery writes it,
and read back through the same answer the status's ``recovery.decisions`` uses.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon.api.services import DaemonServices
from daemon.ports.parts import StoreAudit
from daemon.store import Store
from recovery.actions import Action


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    yield opened
    opened.close()


def services(store: Store) -> DaemonServices:
    """Only the store matters to ``last_decisions``; the rest is never reached."""
    unused: Any = None
    return DaemonServices(
        store,
        unused,
        None,
        caps=unused,
        gpu=unused,
        follower=unused,
        token="",
        loopback_only=True,
        sim=None,
    )


def test_a_canary_hold_shows_among_the_decisions(store: Store) -> None:
    audit = StoreAudit(store, dry_run=False)
    audit.record("recovery", Action.STOP_AND_HOLD, "canary failed", "engine stopped and held")
    store.audit("fleetd", "profile_switch", "done", reason="not recovery's")

    decisions = services(store).last_decisions()

    assert [(d.action, d.outcome) for d in decisions] == [
        ("stop_and_hold", "engine stopped and held")
    ]
