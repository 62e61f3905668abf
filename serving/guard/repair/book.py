"""The repairs' accounts: what was done per session and per key, stale marks, nudge budgets.

Kept beside the session book (``serving.guard.sessions``), keyed by the same session id,
bounded the same way (the least recently seen first). fleetd reads ``document()`` with the
rest of the guard's counters each sync: ``/metrics``, ``GET /api/v1/guard/usage`` and
``fleetctl guard`` show it.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from serving.guard.repair.kinds import Repair

MAX_SESSIONS = 2000
HOUR_S = 3600


@dataclass
class SessionRepairs:
    """One session's repairs."""

    fingerprint: str  # the build, profile and pins it began under
    repairs: Counter[str] = field(default_factory=Counter)
    cleaned_turns: int = 0
    refused: Counter[str] = field(default_factory=Counter)  # salvage's reasons
    stale: bool = False
    told: bool = False  # the stale event was recorded
    nudges: list[float] = field(default_factory=list)  # monotonic times, the last hour

    def as_dict(self) -> dict[str, Any]:
        """The session row's ``repairs`` part."""
        return {
            "repairs": dict(self.repairs),
            "cleaned_turns": self.cleaned_turns,
            "salvage_refused": dict(self.refused),
            "stale": self.stale,
        }


class RepairBook:
    """Repairs by session, by key and hour, and in total (single-threaded: the loop)."""

    def __init__(
        self,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._wall = wall
        self._monotonic = monotonic
        self._sessions: OrderedDict[str, SessionRepairs] = OrderedDict()
        self.totals: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.by_key_hour: dict[tuple[str, int], Counter[str]] = {}

    def session(self, sid: str, fingerprint: str) -> SessionRepairs:
        """The session's record (its fingerprint is the one it began under)."""
        found = self._sessions.get(sid)
        if found is None:
            found = SessionRepairs(fingerprint)
            self._sessions[sid] = found
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        self._sessions.move_to_end(sid)
        return found

    def get(self, sid: str) -> SessionRepairs | None:
        """The session's record, if it has one."""
        return self._sessions.get(sid)

    def count(self, record: SessionRepairs, key: str, done: Iterable[Repair], by: int = 1) -> None:
        """Repairs made for ``key`` in ``record``'s session."""
        hour = int(self._wall()) // HOUR_S * HOUR_S
        slot = self.by_key_hour.setdefault((key, hour), Counter())
        for item in done:
            record.repairs[str(item)] += by
            self.totals[str(item)] += by
            slot[str(item)] += by
        oldest = hour - 48 * HOUR_S
        for old in [slot_key for slot_key in self.by_key_hour if slot_key[1] < oldest]:
            del self.by_key_hour[old]

    def refuse(self, record: SessionRepairs, key: str, reason: str) -> None:
        """Markup salvage left as text, and why."""
        self.count(record, key, (Repair.SALVAGE_REFUSED,))
        record.refused[reason] += 1
        self.refused[reason] += 1

    def nudge_allowed(self, record: SessionRepairs, per_hour: int) -> bool:
        """True (and spent) when the session may be nudged once more this hour."""
        now = self._monotonic()
        record.nudges = [at for at in record.nudges if now - at < HOUR_S]
        if len(record.nudges) >= per_hour:
            return False
        record.nudges.append(now)
        return True

    def repairs_of(self, key: str, hour: int) -> dict[str, int]:
        """One key's repairs in one hour."""
        return dict(self.by_key_hour.get((key, hour), {}))

    def document(self) -> dict[str, Any]:
        """Totals and the reasons markup stayed text."""
        return {"totals": dict(self.totals), "salvage_refused": dict(self.refused)}
