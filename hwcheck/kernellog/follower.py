"""Turn a kernel-log source into classified Xid events, one event path for the daemon.

``run()`` is the blocking loop of a daemon thread (wait, read, parse, call back) and
``drain()`` is one pass without waiting, so the daemon's startup catch-up and its live
follow share the same code. ``last_cursor`` advances only after the callback for a record
returned, so persisting it never skips an event whose handling failed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.parser import parse_gpu_uuid_line, parse_xid
from hwcheck.kernellog.records import KernelLogCursor, KernelLogSource, KernelRecord
from hwcheck.model import ClassifiedXid

XidCallback = Callable[[ClassifiedXid, KernelRecord], None]
DEFAULT_WAIT_S = 0.5


class XidFollower:
    """Feeds every Xid of ``source`` to ``on_event`` until ``stop`` is set.

    ``gpu_uuids`` maps PCI addresses to UUIDs learned from ``NVRM: GPU at PCI:...`` lines.
    Exceptions from the source or the callback propagate (out of ``drain`` and ``run``):
    the daemon decides whether to reopen the source, nothing is dropped here.
    """

    def __init__(
        self,
        source: KernelLogSource,
        catalogue: XidCatalogue,
        on_event: XidCallback,
        stop: threading.Event,
        *,
        cursor: KernelLogCursor | None = None,
        wait_s: float = DEFAULT_WAIT_S,
    ) -> None:
        self.source = source
        self._catalogue = catalogue
        self._on_event = on_event
        self._stop = stop
        self._wait_s = wait_s
        self._last_cursor = cursor
        self.gpu_uuids: dict[str, str] = {}
        self._passes = 0
        self._passed = threading.Condition()

    @property
    def last_cursor(self) -> KernelLogCursor | None:
        """``(boot_id, seq)`` of the last record fully handled (persist it to resume)."""
        return self._last_cursor

    def classify_record(self, record: KernelRecord) -> ClassifiedXid | None:
        """The record's Xid with its verdict, seq and boot id from the record; else None.

        Only the kernel's own records are Xids here: one a process wrote into the kernel
        log (user facility) is ignored, whatever it says.
        """
        if record.from_user_space:
            return None
        event = parse_xid(record.text)
        if event is None:
            return None
        event = replace(
            event,
            seq=record.seq if record.seq is not None else event.seq,
            boot_id=record.boot_id,
        )
        return ClassifiedXid(event=event, info=self._catalogue.classify(event))

    def _handle(self, record: KernelRecord) -> ClassifiedXid | None:
        found = self.classify_record(record)
        if found is not None:
            self._on_event(found, record)
        else:
            uuid_line = parse_gpu_uuid_line(record.text)
            if uuid_line is not None:
                self.gpu_uuids[uuid_line[0]] = uuid_line[1]
        if record.seq is not None and record.boot_id is not None:
            self._last_cursor = KernelLogCursor(boot_id=record.boot_id, last_seq=record.seq)
        return found

    def drain(self) -> list[ClassifiedXid]:
        """One pass over what the source has now, without waiting; returns the Xids fed."""
        found: list[ClassifiedXid] = []
        for record in self.source.read_available():
            classified = self._handle(record)
            if classified is not None:
                found.append(classified)
        with self._passed:
            self._passes += 1
            self._passed.notify_all()
        return found

    def wait_caught_up(self, timeout_s: float) -> bool:
        """Wait until a pass begun after this call has finished; False after ``timeout_s``.

        The log is then read up to the moment of the call. For a thread other than the one
        running ``run``.
        """
        with self._passed:
            target = self._passes + 2  # the pass under way may have begun before the call
            return self._passed.wait_for(lambda: self._passes >= target, timeout_s)

    def run(self) -> None:
        """Drain, then wait for more (at most ``wait_s`` at a time) until ``stop`` is set."""
        while not self._stop.is_set():
            self.drain()
            if self._stop.is_set():
                return
            self.source.wait(self._wait_s)
