"""Is fleetd reading the kernel log? The ``kernel_log`` reading and the record of blind spells.

While the follower thread is down no Xid is seen: the rig is blind. That must show in
status (the ``kernel_log`` check, ``hwcheck.checks.kernel_log``, judges this module's
reading: warning with the error, and when records were lost to a ring-buffer overrun),
in the event history (one event when it goes down, one when it is back with how long it
was blind), and to systemd (``down_for_s`` gates the watchdog).
The events are queued here and written by whoever next reaches a working store, because
the store itself may be why the follower is down.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from daemon.rig.monitor import RigMonitor
from hwcheck.checks.kernel_log import CHECK_ID, judge
from hwcheck.checks.readings import BlindSpellReading, KernelLogReading
from hwcheck.model import EventKind, Severity

EVENT_KIND = EventKind.DAEMON
# Events waiting for the store: a follower flapping while the store is down must not grow
# memory without bound; the oldest are dropped first (the check still says what is wrong).
MAX_PENDING_EVENTS = 100


@dataclass(frozen=True, slots=True)
class BlindSpell:
    """One time the follower was down: since when, the error, and (once over) how long."""

    since: datetime
    since_monotonic_s: float
    error: str
    blind_s: float | None = None

    def clock(self) -> str:
        """``HH:MM:SS UTC`` of the start."""
        return f"{self.since.astimezone(UTC):%H:%M:%S} UTC"


@dataclass(frozen=True, slots=True)
class PendingEvent:
    """An event to store once the store answers."""

    severity: Severity
    message: str
    ts: datetime
    details: dict[str, Any]


class FollowerHealth:
    """Thread-safe state of the kernel-log follower (written by its thread, read by all)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._down: BlindSpell | None = None
        self._last_spell: BlindSpell | None = None
        self._source = "not started"
        self._lost_records = 0
        self._pending: list[PendingEvent] = []
        self._flushing = threading.Lock()

    # -- transitions (the follower thread) ----------------------------------------------
    def went_down(self, error: str, since: tuple[datetime, float] | None = None) -> bool:
        """Record a failure; True when the follower was up until now (a new blind spell).

        ``since`` (wall, monotonic) is when the follower actually stopped, when that was
        before the failure was reported (a write that hung, then failed); else now.
        """
        with self._lock:
            if self._down is not None:
                self._down = BlindSpell(self._down.since, self._down.since_monotonic_s, error)
                return False
            wall, mono = since if since is not None else (self._wall_clock(), self._clock())
            self._down = BlindSpell(wall, mono, error)
            self._queue(
                PendingEvent(
                    Severity.WARNING,
                    f"kernel-log follower down: {error}; Xids are not seen until it is back",
                    self._down.since,
                    {"check": CHECK_ID, "error": error},
                )
            )
            return True

    def came_back(self, source: str) -> BlindSpell | None:
        """The follower reads again (from ``source``); the spell that ended, if one did."""
        with self._lock:
            self._source = source
            spell, self._down = self._down, None
            if spell is None:
                return None
            ended = BlindSpell(
                spell.since,
                spell.since_monotonic_s,
                spell.error,
                self._clock() - spell.since_monotonic_s,
            )
            self._last_spell = ended
            self._queue(
                PendingEvent(
                    Severity.INFO,
                    f"kernel-log follower back after {ended.blind_s:.0f} s: the rig was blind "
                    f"to Xids since {ended.clock()}; the missed records were read from the cursor",
                    self._wall_clock(),
                    {
                        "check": CHECK_ID,
                        "error": spell.error,
                        "blind_s": round(ended.blind_s or 0, 3),
                    },
                )
            )
            return ended

    def _queue(self, event: PendingEvent) -> None:
        """Queue ``event`` (lock held), dropping the oldest beyond MAX_PENDING_EVENTS."""
        self._pending.append(event)
        del self._pending[:-MAX_PENDING_EVENTS]

    def set_lost_records(self, lost: int) -> None:
        """Kernel records overwritten before they were read (this boot)."""
        with self._lock:
            self._lost_records = lost

    def new_boot(self) -> None:
        """A new boot: records lost in the last one no longer matter."""
        with self._lock:
            self._lost_records = 0
            self._last_spell = None

    # -- readers ------------------------------------------------------------------------
    def down_for_s(self) -> float | None:
        """Seconds the follower has been down, None while it reads."""
        with self._lock:
            return None if self._down is None else self._clock() - self._down.since_monotonic_s

    def reading(self) -> KernelLogReading:
        """What the ``kernel_log`` check judges: the source, a spell now, lost records, the last spell."""
        with self._lock:
            down, lost, last, source = (
                self._down,
                self._lost_records,
                self._last_spell,
                self._source,
            )
            now_s = self._clock()
        return KernelLogReading(
            source=source,
            down=None
            if down is None
            else BlindSpellReading(down.since, down.error, now_s - down.since_monotonic_s),
            lost_records=lost,
            last_spell=None
            if last is None
            else BlindSpellReading(last.since, last.error, last.blind_s or 0.0),
        )

    # -- events -------------------------------------------------------------------------
    def flush_events(self, record: Callable[[PendingEvent], object]) -> None:
        """Write the queued events with ``record``; those it fails on stay queued.

        Never raises: the caller is a poll or the follower, and the store may still be down.
        """
        if not self._flushing.acquire(blocking=False):
            return  # another thread is writing them
        try:
            while True:
                with self._lock:
                    if not self._pending:
                        return
                    event = self._pending[0]
                try:
                    record(event)
                except Exception:
                    return
                with self._lock:
                    self._pending.pop(0)
        finally:
            self._flushing.release()


def put_kernel_log_result(monitor: RigMonitor, health: FollowerHealth) -> None:
    """The follower went down or came back: the ``kernel_log`` check says so now.

    Subscribed to the follower's health where fleetd builds it, so the status does not
    wait for the next poll to show the rig blind (or seeing again).
    """
    monitor.put_result(judge(health.reading()))
