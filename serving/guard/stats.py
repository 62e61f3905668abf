"""The guard's counters: what fleetd reads each poll and re-exports on ``/metrics``.

Counters run from the guard's start (fleetd adds them up across guard restarts); token
usage is kept per client key and hour, so fleetd can store the hours and answer
``GET /api/v1/guard/usage``. Keys are named, never shown.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from serving.guard.counters import GuardCounter
from serving.guard.repair.book import RepairBook
from serving.guard.repair.queue import QueueFigures
from serving.guard.sessions import Session, SessionBook
from serving.guard.watch import Usage

ANONYMOUS = "anonymous"  # the account of a guard without keys
HOUR_S = 3600
KEEP_HOURS = 48


def hour_start(ts: float) -> int:
    """The start of ``ts``'s hour (epoch seconds)."""
    return int(ts) // HOUR_S * HOUR_S


@dataclass
class KeyHour:
    """One key's use in one hour."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class GuardStats:
    """Counters by name, token use by key and hour, and the session book."""

    book: SessionBook
    wall: Callable[[], float] = time.time
    started: float = field(default_factory=time.time)
    counters: Counter[str] = field(default_factory=Counter)
    signs: Counter[str] = field(default_factory=Counter)
    usage: dict[tuple[str, int], KeyHour] = field(default_factory=dict)
    repairs: RepairBook = field(default_factory=RepairBook)
    queue: QueueFigures = field(default_factory=QueueFigures)
    in_flight: int = 0  # requests past the drain's door and not yet answered (a drain waits)

    def count(self, name: GuardCounter, by: int = 1) -> None:
        """Add to one counter (``requests``, ``pinned``, ``cap_refused`` ...)."""
        self.counters[name] += by

    def account(self, key: str, usage: Usage | None) -> None:
        """One request of ``key`` (tokens when the engine reported them)."""
        hour = hour_start(self.wall())
        slot = self.usage.setdefault((key, hour), KeyHour())
        slot.requests += 1
        if usage is not None:
            slot.prompt_tokens += usage.prompt_tokens
            slot.completion_tokens += usage.completion_tokens
            self.counters[GuardCounter.PROMPT_TOKENS] += usage.prompt_tokens
            self.counters[GuardCounter.COMPLETION_TOKENS] += usage.completion_tokens
        oldest = hour - KEEP_HOURS * HOUR_S
        for stale in [slot_key for slot_key in self.usage if slot_key[1] < oldest]:
            del self.usage[stale]

    def _hours(self) -> dict[tuple[str, int], KeyHour]:
        """Every key and hour with use or repairs (a refused request repairs, uses nothing)."""
        hours = dict(self.usage)
        for slot_key in self.repairs.by_key_hour:
            hours.setdefault(slot_key, KeyHour())
        return hours

    def _row(self, session: Session, since: float) -> dict[str, Any]:
        """A session's row, with its repairs."""
        row = session.as_dict(since)
        record = self.repairs.get(session.id)
        if record is not None:
            row.update(record.as_dict())
        return row

    def document(self, since_seq: int) -> dict[str, Any]:
        """What the control endpoint answers: counters, usage, sessions, news."""
        now = self.wall()
        since = now - HOUR_S
        sessions = [s for s in self.book.sessions() if s.last_seen >= since]
        return {
            "started": self.started,
            "counters": dict(self.counters),
            "signs": dict(self.signs),
            "usage": [
                {
                    "key": key,
                    "hour": hour,
                    "requests": slot.requests,
                    "prompt_tokens": slot.prompt_tokens,
                    "completion_tokens": slot.completion_tokens,
                    "repairs": self.repairs.repairs_of(key, hour),
                }
                for (key, hour), slot in sorted(self._hours().items())
            ],
            "sessions": [self._row(session, since) for session in sessions[:200]],
            "repairs": self.repairs.document(),
            "queue": self.queue.as_dict(),
            "in_flight": self.in_flight,
            "news": [item.as_dict() for item in self.book.news_since(since_seq)],
        }
