"""Automatic CUDA probes coalesced and rate-limited per card.

A suspicious Xid with the engine stopped asks whether the cards are still usable: a
probe. A driver repeating such an Xid (4,052 Xid 45s with the engine stopped, issue 22)
queued a probe each, 4,053 in all, each a CUDA context on every card. Now at most one
automatic probe waits at a time (the Xids behind it fold into it), each card is probed
at most once per ``min_interval_s`` (any probe counts, a start's included), and none
runs while a person holds the engine stopped: no start is pending, so the answer would
serve nobody. A start's own probe is never limited: a start needs a fresh answer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

PROBE_MIN_INTERVAL_S = 60.0


class ProbeLimiter:
    """The one queued automatic probe and each card's last probe (thread-safe)."""

    def __init__(
        self, clock: Callable[[], float], min_interval_s: float = PROBE_MIN_INTERVAL_S
    ) -> None:
        self._clock = clock
        self._min_interval_s = min_interval_s
        self._lock = threading.Lock()
        self._queued = False
        self._probed_at_s: dict[int, float] = {}

    def claim(self) -> bool:
        """True when no automatic probe is queued: the caller queues one (and owns it)."""
        with self._lock:
            if self._queued:
                return False
            self._queued = True
            return True

    def release(self) -> None:
        """The queued probe is being taken up: a later trigger may queue the next one."""
        with self._lock:
            self._queued = False

    def due(self, cards: Iterable[int]) -> list[int]:
        """Those of ``cards`` not probed within ``min_interval_s``."""
        now_s = self._clock()
        with self._lock:
            return [
                card
                for card in cards
                if now_s - self._probed_at_s.get(card, float("-inf")) >= self._min_interval_s
            ]

    def note(self, cards: Iterable[int]) -> None:
        """``cards`` were probed now."""
        now_s = self._clock()
        with self._lock:
            for card in cards:
                self._probed_at_s[card] = now_s

    def new_boot(self) -> None:
        """A reboot: no probe of the last boot says anything about this one."""
        with self._lock:
            self._probed_at_s.clear()
