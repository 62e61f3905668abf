"""The one event path every Xid takes: kernel-log record -> store -> monitor.

The follower thread calls ``XidPath.handle`` for each Xid it parses. The store insert and
the kernel-log cursor move in one transaction keyed by ``(boot_id, seq)``, so a daemon
killed at any instant neither loses an Xid nor counts it twice after a restart.
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Callable
from dataclasses import replace

from daemon.monitor import RigMonitor
from daemon.store import Store
from hwcheck.checks.xid import xid_severity
from hwcheck.host import HostSources
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.follower import XidFollower
from hwcheck.kernellog.records import KernelLogCursor, KernelRecord
from hwcheck.model import ClassifiedXid

log = logging.getLogger("fleetd.xid")


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
    ) -> None:
        self._store = store
        self._monitor = monitor
        self._card_index_of = card_index_of
        self._listeners = list(listeners or [])

    def add_listener(self, listener: Callable[[ClassifiedXid, int | None], None]) -> None:
        """Call ``listener(xid, card_index)`` for every new Xid."""
        self._listeners.append(listener)

    def handle(self, item: ClassifiedXid, record: KernelRecord) -> None:
        """Store the Xid with its cursor; announce it only if it was new."""
        item = with_journal_key(item, record)
        card = self._card_index_of(item.event.pci_bus_id)
        cursor = None
        if record.boot_id is not None and record.seq is not None:
            cursor = KernelLogCursor(boot_id=record.boot_id, last_seq=record.seq)
        severity = xid_severity(item).value  # the xid check's own rule, so both agree
        where = f"card {card}" if card is not None else (item.event.pci_bus_id or "unknown card")
        message = f"Xid {item.event.xid} on {where}: {item.info.explanation}"
        is_new = self._store.record_xid_and_cursor(
            item, card=card, severity=severity, message=message, cursor=cursor
        )
        if not is_new:
            return
        self._monitor.add_xid(item)
        log.warning("%s [class=%s action=%s]", message, item.info.xid_class, item.info.action)
        for listener in self._listeners:
            try:
                listener(item, card)
            except Exception:
                log.exception("an Xid listener failed")


class FollowerThread:
    """Runs the kernel-log follower in a daemon thread; restartable on a new boot."""

    def __init__(self, host: HostSources, catalogue: XidCatalogue, store: Store, path: XidPath):
        self._host = host
        self._catalogue = catalogue
        self._store = store
        self._path = path
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._follower: XidFollower | None = None

    def start(self) -> int:
        """Open the kernel log after the stored cursor, read what is there, then follow it.

        Returns how many Xids the synchronous first read found.
        """
        cursor = self._store.get_cursor()
        source = self._host.open_kernel_log(cursor)
        self._stop = threading.Event()
        self._follower = XidFollower(
            source, self._catalogue, self._path.handle, self._stop, cursor=cursor
        )
        found = len(self._follower.drain())
        self._thread = threading.Thread(target=self._run, name="kernel-log", daemon=True)
        self._thread.start()
        return found

    def _run(self) -> None:
        follower = self._follower
        if follower is None:
            return
        try:
            follower.run()
        except Exception:
            log.exception("kernel-log follower stopped on an error")
        finally:
            follower.source.close()

    def persist_cursor(self) -> None:
        """Save how far the follower read (records without an Xid move it too)."""
        follower = self._follower
        if follower is not None and follower.last_cursor is not None:
            self._store.set_cursor(follower.last_cursor)

    @property
    def lost_records(self) -> int:
        """Kernel records overwritten before we read them."""
        follower = self._follower
        return follower.source.lost_records if follower is not None else 0

    def alive(self) -> bool:
        """True while the follower thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop following and save the cursor."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self.persist_cursor()
