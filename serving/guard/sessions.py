"""Sessions: each agent conversation's depth and what its replies showed.

A session is named by the client (``[guard] session_header``) or by a hash of the
conversation up to its first user message, which stays the same turn after turn, and
always within the client's key: the same name or the same opening under another key is
another session (one key's client never reads or feeds another's, issue 36). The book
keeps the depth (the engine's ``usage.prompt_tokens``, else the cap's count), the signs
its replies showed, and news: the first time a session crosses the depth, leak or loop
threshold, one item fleetd records as an event. Bounded: the least recently seen session
goes first, and sessions quiet for a day are dropped.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from serving.detectors import LEAKS, LOOPS, Sign

MAX_SESSIONS = 2000
FORGET_AFTER_S = 86_400.0
ID_CHARS = 12


def session_id(request: Mapping[str, Any], named: str | None, key: str) -> str:
    """The session a request of ``key``'s belongs to (a short hash: never the client's text)."""
    if named:
        seed: object = ["header", named]
    else:
        messages = request.get("messages")
        if isinstance(messages, list):
            head: list[object] = []
            for message in messages:
                head.append(message)
                if isinstance(message, dict) and message.get("role") == "user":
                    break
            seed = head
        else:
            prompt = request.get("prompt")
            seed = ["prompt", prompt[:4000] if isinstance(prompt, str) else prompt]
    text = json.dumps(["key", key, seed], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:ID_CHARS]


@dataclass(frozen=True, slots=True)
class News:
    """A session crossed a threshold: what fleetd records as a ``guard`` event."""

    seq: int
    session: str
    kind: str  # depth | leaks | loops
    message: str
    key: str
    value: int

    def as_dict(self) -> dict[str, Any]:
        """The control document's form."""
        return {
            "seq": self.seq,
            "session": self.session,
            "kind": self.kind,
            "message": self.message,
            "key": self.key,
            "value": self.value,
        }


@dataclass
class Session:
    """One conversation as the guard saw it."""

    id: str
    key: str
    first_seen: float  # wall clock, for the panel
    last_seen: float
    last_seen_s: float  # monotonic, for the bounds
    requests: int = 0
    depth_tokens: int = 0
    max_depth_tokens: int = 0
    signs: Counter[str] = field(default_factory=Counter)
    recent: list[tuple[float, str]] = field(default_factory=list)  # (wall time, sign)
    told: set[str] = field(default_factory=set)  # thresholds already news

    def count(self, family: frozenset[Sign]) -> int:
        """Replies' signs of one family (leaks or loops) so far."""
        return sum(self.signs[str(sign)] for sign in family)

    def as_dict(self, since: float) -> dict[str, Any]:
        """The panel's row; signs in the last hour (``since``) beside the totals."""
        hour = [sign for ts, sign in self.recent if ts >= since]
        return {
            "id": self.id,
            "key": self.key,
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "requests": self.requests,
            "depth_tokens": self.depth_tokens,
            "max_depth_tokens": self.max_depth_tokens,
            "signs": dict(self.signs),
            "leaks_last_hour": sum(1 for sign in hour if Sign(sign) in LEAKS),
            "loops_last_hour": sum(1 for sign in hour if Sign(sign) in LOOPS),
        }


@dataclass(frozen=True, slots=True)
class Thresholds:
    """When a session is news."""

    depth_tokens: int
    leaks: int
    loops: int


class SessionBook:
    """Every recent session, and the news they made (single-threaded: the guard's loop)."""

    def __init__(
        self,
        thresholds: Thresholds,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._thresholds = thresholds
        self._wall = wall
        self._monotonic = monotonic
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._news: list[News] = []
        self._seq = 0

    def touch(self, sid: str, key: str) -> Session:
        """The session, created or moved to the most recent end."""
        now, now_s = self._wall(), self._monotonic()
        session = self._sessions.get(sid)
        if session is None:
            session = Session(sid, key, now, now, now_s)
            self._sessions[sid] = session
        self._sessions.move_to_end(sid)
        session.last_seen, session.last_seen_s = now, now_s
        session.requests += 1
        self._forget(now_s)
        return session

    def depth(self, sid: str) -> int | None:
        """The session's last known depth in tokens (None: not seen)."""
        session = self._sessions.get(sid)
        return None if session is None or not session.depth_tokens else session.depth_tokens

    def observe(self, session: Session, depth_tokens: int | None, signs: Iterable[Sign]) -> None:
        """One reply's depth and signs; news when a threshold is crossed."""
        now = self._wall()
        if depth_tokens is not None:
            session.depth_tokens = depth_tokens
            session.max_depth_tokens = max(session.max_depth_tokens, depth_tokens)
        for sign in signs:
            session.signs[str(sign)] += 1
            session.recent.append((now, str(sign)))
        session.recent = [(ts, sign) for ts, sign in session.recent if ts >= now - 3600]
        limits = self._thresholds
        if session.depth_tokens >= limits.depth_tokens:
            self._tell(session, "depth", session.depth_tokens, "tokens deep")
        if session.count(LEAKS) >= limits.leaks:
            self._tell(session, "leaks", session.count(LEAKS), "replies leaked")
        if session.count(LOOPS) >= limits.loops:
            self._tell(session, "loops", session.count(LOOPS), "replies looped")

    def note(self, session: Session, kind: str, message: str, value: int) -> None:
        """News a repair made (a loop cut, a stale session): recorded as a ``guard`` event."""
        self._seq += 1
        self._news.append(News(self._seq, session.id, kind, message, session.key, value))
        del self._news[:-200]

    def _tell(self, session: Session, kind: str, value: int, words: str) -> None:
        if kind in session.told:
            return
        session.told.add(kind)
        self._seq += 1
        signs = ", ".join(f"{name} {count}" for name, count in sorted(session.signs.items()))
        message = f"session {session.id} ({session.key}): {value} {words}"
        if kind != "depth" and signs:
            message += f" ({signs})"
        self._news.append(News(self._seq, session.id, kind, message, session.key, value))
        del self._news[:-200]  # fleetd reads each poll: a bounded backlog is plenty

    def news_since(self, seq: int) -> list[News]:
        """News after ``seq``."""
        return [item for item in self._news if item.seq > seq]

    def sessions(self) -> list[Session]:
        """Recent sessions, most recent first."""
        return list(reversed(self._sessions.values()))

    def _forget(self, now_s: float) -> None:
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        while self._sessions:
            oldest = next(iter(self._sessions.values()))
            if now_s - oldest.last_seen_s < FORGET_AFTER_S:
                break
            self._sessions.popitem(last=False)
