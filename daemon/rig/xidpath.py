"""The one event path every Xid takes: kernel-log record -> monitor and recovery -> store.

The follower thread calls ``XidPath.handle`` for each Xid it parses. Acting comes first:
memory (the monitor's keys) says whether the Xid is new, and recovery decides on it (a
latch, a stop) before it is stored, so a store that is locked, full or corrupt cannot
delay or swallow the decision (issue 22). The store insert and the kernel-log cursor
then move in one transaction keyed by ``(boot_id, seq)``; a write that fails raises, the
follower re-reads from its cursor, and memory keeps the decision from being repeated. A
daemon killed between the two is caught by the reconcile at its next start.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from daemon import fault_points
from daemon.rig.kernellog_health import EVENT_KIND, FollowerHealth
from daemon.rig.monitor import RigMonitor
from daemon.store import Store
from hwcheck.host import HostSources
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.follower import XidFollower
from hwcheck.kernellog.kernel_time import kernel_clock
from hwcheck.kernellog.records import KernelLogCursor, KernelRecord
from hwcheck.model import ClassifiedXid
from hwcheck.threads import CrashReport, ServiceThread, Wake, run_in_thread

log = logging.getLogger("fleetd.xid")

# After an error the follower retries at once-ish, then less often: never more than this.
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 30.0


def journal_key(record: KernelRecord) -> int | None:
    """A stable negative key for a record without a kmsg sequence number (journald).

    The journald fallback has no kernel seq, so after a restart it reads the whole boot
    again. Keying its records by their kernel timestamp (plus a hash of the text, in
    case two lines share a microsecond) lets the store's ``(boot_id, seq)`` uniqueness drop
    the repeats. Negative, so it can never collide with a real kmsg seq.
    """
    if record.seq is not None or record.timestamp_usec is None:
        return None
    return -(record.timestamp_usec * 1000 + zlib.crc32(record.text.encode()) % 1000)


def with_journal_key(item: ClassifiedXid, record: KernelRecord) -> ClassifiedXid:
    """``item`` keyed by ``journal_key`` when it came without a kernel sequence number."""
    key = journal_key(record)
    if key is None or item.event.seq is not None:
        return item
    event = replace(item.event, seq=key, boot_id=item.event.boot_id or record.boot_id)
    return replace(item, event=event)


class XidPath:
    """Stores each Xid once, updates the monitor and tells listeners (recovery, alerts)."""

    def __init__(
        self,
        store: Store,
        monitor: RigMonitor,
        card_index_of: Callable[[str | None], int | None],
        listeners: list[Callable[[ClassifiedXid, int | None], None]] | None = None,
        *,
        kernel_clock_s: Callable[[], float] = time.monotonic,
    ) -> None:
        """``kernel_clock_s``: the clock the kernel log's stamps count on (the host's)."""
        self._store = store
        self._monitor = monitor
        self._card_index_of = card_index_of
        self._listeners = list(listeners or [])
        self._kernel_time = kernel_clock(kernel_clock_s)
        self._handling_since: tuple[datetime, float] | None = None  # the record in hand

    def take_stopped_at(self) -> tuple[datetime, float] | None:
        """When the record whose handling failed was taken up (wall, monotonic), once.

        The follower stopped then, not when the failure was reported: a store write that
        waits out a 30 s busy timeout blinds the rig from its first second.
        """
        since, self._handling_since = self._handling_since, None
        return since

    def add_listener(self, listener: Callable[[ClassifiedXid, int | None], None]) -> None:
        """Call ``listener(xid, card_index)`` for every new Xid."""
        self._listeners.append(listener)

    def _prepared(
        self, item: ClassifiedXid, record: KernelRecord
    ) -> tuple[ClassifiedXid, int | None, KernelLogCursor | None, str]:
        """The Xid keyed and timed as stored, its card, its record's cursor, its headline."""
        ts_kernel = self._kernel_time(record.timestamp_usec)
        item = with_journal_key(item, record)
        if ts_kernel is not None:
            item = replace(item, event=replace(item.event, ts_kernel=ts_kernel))
        card = self._card_index_of(item.event.pci_bus_id)
        cursor = None
        if record.boot_id is not None and record.seq is not None:
            cursor = KernelLogCursor(boot_id=record.boot_id, last_seq=record.seq)
        where = f"card {card}" if card is not None else (item.event.pci_bus_id or "unknown card")
        # The headline only: the explanation is shown once (fleetctl explain, status).
        return item, card, cursor, item.info.headline(where)

    def restore(self, item: ClassifiedXid, record: KernelRecord) -> None:
        """Store an Xid read again into a store started afresh: nothing announced or decided.

        Keyed by its kernel record, so one already stored is not stored twice; the cursor
        is left where the live follower put it (this read may be ahead of it, and a new
        Xid it finds must still reach recovery through ``handle``).
        """
        item, card, cursor, message = self._prepared(item, record)
        if cursor is not None and (item.event.seq is None or item.event.boot_id is None):
            event = replace(item.event, seq=cursor.last_seq, boot_id=cursor.boot_id)
            item = replace(item, event=event)
        self._store.record_xid_and_cursor(item, card=card, message=message)

    def handle(self, item: ClassifiedXid, record: KernelRecord) -> None:
        """Announce the Xid if it is new (recovery decides), then store it with its cursor."""
        fault_points.reached(fault_points.XID_READ)
        self._handling_since = (datetime.now(UTC), time.monotonic())
        item, card, cursor, message = self._prepared(item, record)
        if self._monitor.add_xid_if_new(item):
            log.warning("%s [class=%s action=%s]", message, item.info.xid_class, item.info.action)
            for listener in self._listeners:
                try:
                    listener(item, card)
                except Exception:
                    log.exception("an Xid listener failed")
        self._store.record_xid_and_cursor(
            item, card=card, message=message, cursor=cursor
        )  # no severity: the store takes the xid check's own rule (xid_severity)
        self._handling_since = None
        fault_points.reached(fault_points.XID_STORED)


class FollowerThread:
    """Runs the kernel-log follower in a daemon thread that never gives up.

    Any error (the store locked or full, journalctl gone, the log unreadable) closes the
    source; the thread reopens it after a capped backoff from the last record fully
    handled (else the stored cursor), so nothing is lost and the store's ``(boot_id, seq)``
    key drops what is read twice. ``health`` says meanwhile that the rig is blind.
    """

    def __init__(
        self,
        host: HostSources,
        catalogue: XidCatalogue,
        store: Store,
        path: XidPath,
        health: FollowerHealth | None = None,
        *,
        on_health_change: Callable[[], None] | None = None,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        on_crash: CrashReport | None = None,
    ):
        self._host = host
        self._catalogue = catalogue
        self._store = store
        self._path = path
        self.health = health or FollowerHealth()
        self._health_listeners = [] if on_health_change is None else [on_health_change]
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._on_crash = on_crash
        self._thread = ServiceThread("kernel-log", self._run, on_crash=on_crash, log=log)
        self._first: XidFollower | None = None  # opened by start(), handed to the thread
        self._follower: XidFollower | None = None
        self._lost_before = 0  # records lost by sources already closed (this boot)
        self._kept_cursor: KernelLogCursor | None = None  # of the last source closed
        # The cursor the store has (None: unknown, write it): a poll with nothing new read
        # writes nothing (a write transaction per poll, for a cursor that had not moved).
        self._stored_cursor: KernelLogCursor | None = None
        store.add_fresh_listener(self._store_afresh)  # a deleted fleet.db lost this boot's Xids

    def add_health_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` when the follower goes down or comes back (on its thread)."""
        self._health_listeners.append(listener)

    def _on_health_change(self) -> None:
        for listener in self._health_listeners:
            listener()

    def start(self) -> int:
        """Open the kernel log after the stored cursor, read what is there, then follow it.

        Returns how many Xids the synchronous first read found. A failure here does not stop
        fleetd: the thread keeps retrying and the ``kernel_log`` check says why.
        """
        wake = Wake()
        stop = wake.stop_event
        self._lost_before = 0
        self._kept_cursor = None
        self.health.new_boot()
        found = 0
        follower: XidFollower | None = None
        try:
            follower = self._open(self._store.get_cursor(), stop)
            found = len(follower.drain())
            self._came_back(follower)
        except Exception as exc:
            self._went_down(exc)
            self._close(follower)
            follower = None
        self._first = follower
        self._thread.start(wake)
        return found

    def _store_afresh(self) -> None:
        self._stored_cursor = None  # the new file has no cursor either
        self.rebuild_boot()

    def rebuild_boot(self) -> None:
        """This boot's Xids read again from the kernel log into the store, on a thread.

        After ``fleet.db`` was deleted (or replaced) while fleetd ran, the new file lacks
        them: ``xid_since_boot`` after a restart said "no Xid" beside a latch naming one.
        They are only stored (``XidPath.restore``): memory knows them and recovery has
        decided on them. A source that follows a file from its end (``kernel_log =
        "file"``) has nothing of the past to give.
        """
        run_in_thread("kernel-log-rebuild", self._rebuild, on_crash=self._on_crash, log=log)

    def _rebuild(self) -> None:
        source = None
        try:
            source = self._host.open_kernel_log(None)
            stop = threading.Event()
            count = len(XidFollower(source, self._catalogue, self._path.restore, stop).drain())
            log.warning("this boot's kernel log read again into the new store: %d Xid(s)", count)
        except Exception as exc:
            log.error("this boot's Xids could not be read again into the new store: %s", exc)
        finally:
            if source is not None:
                source.close()

    def _open(self, cursor: KernelLogCursor | None, stop: threading.Event) -> XidFollower:
        source = self._host.open_kernel_log(cursor)
        follower = XidFollower(source, self._catalogue, self._path.handle, stop, cursor=cursor)
        self._follower = follower
        return follower

    def _close(self, follower: XidFollower | None) -> None:
        """Close ``follower``'s source, keeping its cursor and lost-record count."""
        if follower is None:
            return
        if self._follower is follower:
            self._follower = None
        self._kept_cursor = follower.last_cursor or self._kept_cursor
        self._lost_before += follower.source.lost_records
        try:
            follower.source.close()
        except Exception:
            log.exception("closing the kernel-log source failed")

    def _went_down(self, exc: Exception) -> None:
        error = f"{exc.__class__.__name__}: {exc}".splitlines()[0]
        if self.health.went_down(error, since=self._path.take_stopped_at()):
            log.error("kernel-log follower down, retrying from its cursor: %s", error)
        self._on_health_change()

    def _came_back(self, follower: XidFollower) -> None:
        self.health.set_lost_records(self._lost_before + follower.source.lost_records)
        spell = self.health.came_back(follower.source.name)
        if spell is not None:
            log.warning(
                "kernel-log follower back after %.0f s (blind since %s)",
                spell.blind_s or 0.0,
                spell.clock(),
            )
            self._on_health_change()
            self.flush_events()

    def _run(self, wake: Wake) -> None:
        """Follow until stopped; after an error, reopen with a doubling, capped backoff."""
        stop = wake.stop_event
        follower, self._first = self._first, None
        delay_s = self._backoff_base_s
        while not wake.stopping:
            try:
                if follower is None:
                    if not wake.rest(delay_s):
                        break
                    delay_s = min(delay_s * 2, self._backoff_max_s)
                    follower = self._open(self._resume_cursor(), stop)
                    follower.drain()
                    self._came_back(follower)
                delay_s = self._backoff_base_s
                follower.run()
            except Exception as exc:
                self._went_down(exc)
                self._close(follower)
                follower = None
        self._close(follower)

    def _resume_cursor(self) -> KernelLogCursor | None:
        """The further of the last record handled (this boot) and the stored cursor."""
        handled = self._kept_cursor
        stored = self._store.get_cursor()
        if handled is None:
            return stored
        if stored is None or stored.boot_id != handled.boot_id:
            return handled
        return stored if stored.last_seq > handled.last_seq else handled

    def persist_cursor(self) -> None:
        """Save how far the follower read (records without an Xid move it too)."""
        follower = self._follower
        cursor = follower.last_cursor if follower is not None else None
        cursor = cursor or self._kept_cursor
        if cursor is not None and cursor != self._stored_cursor:
            self._store.set_cursor(cursor)
            self._stored_cursor = cursor

    def flush_events(self) -> None:
        """Store the queued down/back events (never raises: the store may be the trouble)."""
        self.health.flush_events(
            lambda e: self._store.record_event(
                EVENT_KIND, e.severity, e.message, details=e.details, ts=e.ts
            )
        )

    @property
    def lost_records(self) -> int:
        """Kernel records overwritten before we read them (this boot)."""
        follower = self._follower
        return self._lost_before + (follower.source.lost_records if follower is not None else 0)

    def catch_up(self, timeout_s: float) -> bool:
        """Wait until the kernel log is read up to now; False when it could not be in time."""
        follower = self._follower
        if follower is None or not self.alive():
            return False
        return follower.wait_caught_up(timeout_s)

    def alive(self) -> bool:
        """True while the follower thread runs (reading, or retrying after an error)."""
        return self._thread.alive()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop following and save the cursor."""
        self._thread.stop(timeout_s)
        self.persist_cursor()
