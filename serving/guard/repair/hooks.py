"""Where the repairs meet the guard's proxy (``serving.guard.app``): small, explicit hooks.

``Repairs`` is built once per guard from ``[guard.repair]``; per request it cleans the
history and judges staleness (``before``), makes the reply's ``ReplyRepair`` (salvage,
loops) and repairs a whole reply (``whole``). Every repair is counted per session and per
key in the ``RepairBook`` and named on the response (``x-cmpfleet-repaired``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from serving.guard.errors import GuardError
from serving.guard.repair.answers import stale_session
from serving.guard.repair.book import RepairBook, SessionRepairs
from serving.guard.repair.config import NUDGE_TEXT, RepairSettings
from serving.guard.repair.hygiene import clean_history
from serving.guard.repair.kinds import Repair, header_value
from serving.guard.repair.salvage import declared_tools, markup_start, salvage
from serving.guard.repair.stale import fingerprint, stale_message
from serving.guard.repair.stream import LoopWatch, StreamSalvage

REPAIRED_HEADER = b"x-cmpfleet-repaired"
STALE_HEADER = b"x-cmpfleet-stale"
OVERHEAD_HEADER = b"x-cmpfleet-overhead-ms"


@dataclass
class ReplyRepair:
    """One reply's repairs: what was done, and the stream's salvage and loop watch."""

    key: str
    session: str
    record: SessionRepairs
    done: list[Repair] = field(default_factory=list)
    salvage: StreamSalvage | None = None
    loops: LoopWatch | None = None
    cut: bool = False  # loops = "cut"
    nudge: bool = False  # loop_nudge = "continue" and budget left (checked at the cut)

    def headers(self) -> list[tuple[bytes, bytes]]:
        """``x-cmpfleet-repaired`` (and the stale mark) for the response start."""
        found = [(REPAIRED_HEADER, header_value(self.done))] if self.done else []
        if self.record.stale:
            found.append((STALE_HEADER, b"1"))
        return found


@dataclass
class Timing:
    """The guard's own time on one request (``x-cmpfleet-overhead-ms``).

    From arrival to the response start, less the engine's time to answer and the queue's wait.
    """

    start_s: float = field(default_factory=time.perf_counter)
    away_s: float = 0.0  # at the engine or in the queue
    _left_s: float | None = None

    def leave(self) -> None:
        """The request goes to the engine (or into the queue)."""
        self._left_s = time.perf_counter()

    def back(self) -> None:
        """The engine answered (or the queue admitted)."""
        if self._left_s is not None:
            self.away_s += time.perf_counter() - self._left_s
            self._left_s = None

    def header(self) -> tuple[bytes, bytes]:
        """The header, as of now."""
        spent_s = time.perf_counter() - self.start_s - self.away_s
        return (OVERHEAD_HEADER, f"{max(spent_s, 0.0) * 1000:.3f}".encode())


class Repairs:
    """The guard's repairs, as configured."""

    def __init__(self, settings: RepairSettings, repeats: int, book: RepairBook) -> None:
        self.settings = settings
        self.book = book
        self._repeats = repeats

    def before(
        self,
        request: dict[str, Any],
        key: str,
        session: str,
        runs_under: str,
    ) -> tuple[ReplyRepair, GuardError | None]:
        """Clean the history, judge staleness; the reply's repairs, or the 409 to answer."""
        settings = self.settings
        record = self.book.session(session, runs_under)
        repair = ReplyRepair(key, session, record)
        if not record.fingerprint:  # begun before fleetd named the build: adopt the first
            record.fingerprint = runs_under
        if settings.stale != "off" and runs_under and record.fingerprint != runs_under:
            first = not record.stale
            record.stale = True
            if first:
                self.book.count(record, key, (Repair.STALE,))
            if settings.stale == "refuse":
                return repair, stale_session(session)
        if settings.history == "clean":
            cleaned = clean_history(request)
            if cleaned:
                record.cleaned_turns += cleaned
                self.book.count(record, key, (Repair.HISTORY,))
                repair.done.append(Repair.HISTORY)
        if request.get("stream") is True:
            tools = declared_tools(request)
            if settings.salvage_tool_calls and tools:
                repair.salvage = StreamSalvage(tools, settings.salvage_max_chars)
            repair.loops = LoopWatch(self._repeats)
            repair.cut = settings.loops == "cut"
        return repair, None

    def stale_news(self, repair: ReplyRepair) -> str | None:
        """The event's words the first time a session is found stale."""
        return stale_message(repair.session) if repair.record.stale else None

    def salvaged(self, repair: ReplyRepair, calls: int) -> None:
        """Count a salvage (``calls`` recovered)."""
        if calls:
            self.book.count(repair.record, repair.key, (Repair.SALVAGED,))
            repair.done.append(Repair.SALVAGED)

    def refused(self, repair: ReplyRepair, reason: str) -> None:
        """Count markup left as text."""
        self.book.refuse(repair.record, repair.key, reason)

    def loop_cut(self, repair: ReplyRepair) -> bool:
        """Count a cut loop; True when the session may be nudged instead of left there."""
        self.book.count(repair.record, repair.key, (Repair.LOOP_CUT,))
        repair.done.append(Repair.LOOP_CUT)
        if self.settings.loop_nudge != "continue":
            return False
        if not self.book.nudge_allowed(repair.record, self.settings.nudges_per_hour):
            return False
        self.book.count(repair.record, repair.key, (Repair.NUDGED,))
        repair.done.append(Repair.NUDGED)
        return True

    def whole(self, repair: ReplyRepair, body: dict[str, Any], request: Mapping[str, Any]) -> bool:
        """Salvage a whole reply's markup into ``tool_calls``; True when the body changed."""
        if not self.settings.salvage_tool_calls:
            return False
        changed = False
        tools: dict[str, dict[str, Any]] | None = None
        for choice in body.get("choices") or []:
            message = choice.get("message") if isinstance(choice, dict) else None
            if not isinstance(message, dict) or message.get("tool_calls"):
                continue
            content = message.get("content")
            if not isinstance(content, str) or markup_start(content) is None:
                continue
            tools = declared_tools(request) if tools is None else tools
            outcome = salvage(content, tools)
            if not outcome.calls:
                self.refused(repair, outcome.reason or "not a call")
                continue
            message["content"] = outcome.prefix.strip() or None
            message["tool_calls"] = list(outcome.calls)
            if choice.get("finish_reason") in ("stop", None):
                choice["finish_reason"] = "tool_calls"
            self.salvaged(repair, len(outcome.calls))
            changed = True
        return changed


def nudged_request(request: Mapping[str, Any], said: str) -> dict[str, Any]:
    """The request re-asked after a cut loop: what the model said, then the owners' nudge."""
    messages = list(request.get("messages") or [])
    messages.append({"role": "assistant", "content": said})
    messages.append({"role": "user", "content": NUDGE_TEXT})
    return {**request, "messages": messages}


def runs_under(build: str | None, profile: str | None, pins: Mapping[str, Any]) -> str:
    """What a session runs under now (``stale.fingerprint``).

    "" while the build is unknown (fleetd has not synced yet): no session is judged by it.
    """
    return "" if build is None else fingerprint(build, profile, pins)
