"""``/api/v1/history`` computed once per chart window, not once per request.

Each answer cost about 175 ms of CPU (the store's chart query for every card, then the
bucketing): six dashboards open held a core (issue 22). A chart's resolution is its
bucket (10 s for 1 h, 60 s for 24 h), so an answer is kept for the rest of the bucket it
was computed in, per span and card set, and dropped as soon as a rollup lands (the 24 h
chart reads the rollups: a new minute must show at once). Errors are never kept.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from daemon.rig.history import SPANS, history_document
from daemon.store import Store

Cards = tuple[tuple[int, str], ...]


@dataclass(frozen=True, slots=True)
class _Entry:
    window: int  # the bucket number (epoch seconds // step) it was computed in
    generation: int  # the rollup generation it saw
    last_event_id: int  # the newest event then: a new Xid, latch or reboot is a new marker
    document: dict[str, Any]


class HistoryCache:
    """The history documents of the current windows (thread-safe)."""

    def __init__(
        self,
        store: Store,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        build: Callable[..., dict[str, Any]] = history_document,
    ) -> None:
        self._store = store
        self._wall_clock = wall_clock
        self._build = build
        self._lock = threading.Lock()  # one computation at a time: the rest wait, then hit
        self._entries: dict[tuple[str, Cards], _Entry] = {}
        self._generation = 0
        self.computed = 0  # how many documents were built (the bench and tests read it)
        self.compute_s = 0.0

    def rollups_changed(self) -> None:
        """New rollups were written: every kept document is out of date."""
        with self._lock:
            self._generation += 1
            self._entries.clear()

    def document(self, cards: Sequence[tuple[int, str]], span: str) -> dict[str, Any]:
        """The history of ``cards`` over ``span``: kept, or computed now and kept."""
        chosen = SPANS.get(span)
        if chosen is None:  # the builder says what is wrong, in its one line
            return self._build(self._store, list(cards), span)
        now = self._wall_clock()
        window = int(now.timestamp()) // chosen.step_s
        key = (span, tuple(cards))
        # One indexed max() a request: the chart's markers come from events, so a new one
        # (an Xid, a latch, a reboot) must show at the next refresh, not the next window.
        last_event_id = self._store.latest_event_id()
        with self._lock:
            entry = self._entries.get(key)
            if (
                entry is not None
                and entry.window == window
                and entry.generation == self._generation
                and entry.last_event_id == last_event_id
            ):
                return entry.document
            generation = self._generation
            began_s = time.perf_counter()
            document = self._build(self._store, list(cards), span, now)
            self.compute_s += time.perf_counter() - began_s
            self.computed += 1
            # Only this window's answer for this span is kept: memory stays one per span.
            for stale in [k for k in self._entries if k[0] == span]:
                del self._entries[stale]
            self._entries[key] = _Entry(window, generation, last_event_id, document)
            return document
