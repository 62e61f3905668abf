"""``/api/v1/history`` cached per chart window, dropped by new rollups (issue 22, point 7).

In-process over a real SQLite store with real samples; the wall clock is the one thing
driven by the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from daemon.rig.history import history_document
from daemon.rig.history_cache import HistoryCache
from daemon.store import Store
from hwcheck.model import EventKind, Severity
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import load_scenario
from serving.errors import InvalidInput, Unavailable

T0 = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    rig = SimulatedRig(load_scenario("healthy"), tmp_path / "sim")
    opened.record_samples(rig.host_sources().gpu.snapshot())
    yield opened
    opened.close()


def cards_of(store: Store) -> list[tuple[int, str]]:
    """The simulated cards the store has samples of."""
    return [(card.index, card.uuid) for card in load_scenario("healthy").cards]


def test_one_computation_per_window_and_span(store: Store) -> None:
    clock = Clock()
    cache = HistoryCache(store, wall_clock=clock)
    cards = cards_of(store)
    first = cache.document(cards, "1h")
    clock.now = T0 + timedelta(seconds=9)  # same 10 s bucket
    assert cache.document(cards, "1h") is first
    assert cache.computed == 1
    assert first == history_document(store, cards, "1h", T0)  # what it keeps is the answer
    assert len(first["cards"]) == len(cards)
    clock.now = T0 + timedelta(seconds=10)  # the next bucket
    assert cache.document(cards, "1h") is not first
    day = cache.document(cards, "24h")
    clock.now = T0 + timedelta(seconds=59)  # the 24 h chart's bucket is a minute
    assert cache.document(cards, "24h") is day
    assert cache.computed == 3


def test_a_new_rollup_or_another_card_set_computes_again(store: Store) -> None:
    cache = HistoryCache(store, wall_clock=Clock())
    cards = cards_of(store)
    day = cache.document(cards, "24h")
    cache.rollups_changed()
    assert cache.document(cards, "24h") is not day
    assert cache.document(cards[:1], "24h")["cards"][0]["card"] == 0
    assert cache.computed == 3


def test_errors_are_never_kept(store: Store) -> None:
    calls: list[str] = []

    def flaky(store: Store, cards: list[tuple[int, str]], span: str, *rest: Any) -> Any:
        calls.append(span)
        if len(calls) == 1:
            raise Unavailable("history unavailable: store locked", "store")
        return history_document(store, cards, span, *rest)

    cache = HistoryCache(store, wall_clock=Clock(), build=flaky)
    with pytest.raises(Unavailable):
        cache.document(cards_of(store), "1h")
    assert cache.document(cards_of(store), "1h")["span"] == "1h"
    with pytest.raises(InvalidInput):
        cache.document(cards_of(store), "7d")


def test_a_new_event_is_a_new_marker_at_once(store: Store) -> None:
    """An Xid, a latch or a reboot is a chart marker: the kept window does not hide it."""
    clock = Clock()
    cache = HistoryCache(store, wall_clock=clock)
    cards = cards_of(store)
    first = cache.document(cards, "1h")
    store.record_event(EventKind.XID, Severity.CRITICAL, "Xid 31 (MMU page fault) on card 1")
    again = cache.document(cards, "1h")  # same bucket, a new event
    assert again is not first and cache.computed == 2
    assert cache.document(cards, "1h") is again  # and kept again until the next one
