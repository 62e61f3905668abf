"""Follow ``/dev/kmsg``: one record per ``read()``, non-blocking, resumable by sequence number.

``/dev/kmsg`` is the primary kernel-log source: it has sequence numbers (so a restarted
daemon neither loses nor double counts), it needs no journald, and ``poll()`` wakes the
follower the moment the driver prints an Xid. The kernel's read is injectable
(``read_record``) because ``EPIPE`` (records overwritten before we read them) cannot be
forced on a real ring buffer in a test; everything else is the real device.
"""

from __future__ import annotations

import errno
import os
import select
from collections.abc import Callable
from pathlib import Path

from hwcheck.bootid import BootIdError, read_boot_id
from hwcheck.kernellog.errors import KMSG_PERMISSION_HINT, KernelLogUnavailable
from hwcheck.kernellog.kmsg_format import parse_kmsg_record
from hwcheck.kernellog.records import KernelLogCursor, KernelRecord

DEFAULT_KMSG_PATH = "/dev/kmsg"
# The kernel returns one whole record per read; 8 KiB holds the longest one (it says
# EINVAL when the buffer is too small).
KMSG_RECORD_BUFFER_BYTES = 8192

RecordReader = Callable[[int], bytes]


def read_one_record(fd: int) -> bytes:
    """One ``/dev/kmsg`` record (the kernel's read: raises ``EAGAIN``/``EPIPE`` as OSError)."""
    return os.read(fd, KMSG_RECORD_BUFFER_BYTES)


def open_kmsg_fd(path: str) -> int:
    """Open ``path`` read-only and non-blocking, or raise a one-line KernelLogUnavailable."""
    try:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except PermissionError:
        raise KernelLogUnavailable(f"cannot read {path}: {KMSG_PERMISSION_HINT}") from None
    except FileNotFoundError:
        raise KernelLogUnavailable(f"cannot read {path}: no such file or device") from None
    except OSError as exc:
        raise KernelLogUnavailable(f"cannot read {path}: {exc.strerror or exc}") from None


class KmsgSource:
    """A ``KernelLogSource`` over ``/dev/kmsg``.

    - With a cursor of this boot it reads the ring buffer from its oldest record and skips
      ``seq <= cursor.last_seq``; a cursor of another boot means "read all of this boot".
    - Without a cursor, ``from_start=False`` seeks to the end (history is skipped) and
      ``from_start=True`` reads this boot's history first.
    - ``boot_id`` defaults to this host's (``/proc/sys/kernel/random/boot_id``).
    - ``lost_records`` counts sequence numbers that were overwritten before they were read:
      gaps after ``EPIPE`` and, when resuming, between the cursor and the oldest record left.
    """

    name = "kmsg"

    def __init__(
        self,
        path: str | Path = DEFAULT_KMSG_PATH,
        cursor: KernelLogCursor | None = None,
        boot_id: str | None = None,
        from_start: bool = False,
        *,
        read_record: RecordReader = read_one_record,
    ) -> None:
        self.path = str(path)
        if boot_id is None:
            try:
                boot_id = read_boot_id()
            except BootIdError as exc:
                raise KernelLogUnavailable(str(exc)) from None
        self.boot_id = boot_id
        self._read = read_record
        self._fd: int | None = open_kmsg_fd(self.path)
        resuming = cursor is not None and cursor.boot_id == boot_id
        self._skip_through: int | None = cursor.last_seq if resuming and cursor else None
        self._expected_seq: int | None = (
            self._skip_through + 1 if self._skip_through is not None else None
        )
        self._lost = 0
        self._overwrites = 0
        self._unparsable = 0
        if cursor is None and not from_start:
            os.lseek(self._fd, 0, os.SEEK_END)
        self._poll = select.poll()
        self._poll.register(self._fd, select.POLLIN | select.POLLPRI)

    @property
    def lost_records(self) -> int:
        """Records overwritten before they could be read."""
        return self._lost

    @property
    def overwrites(self) -> int:
        """How many reads answered ``EPIPE`` (each is one jump of the read position)."""
        return self._overwrites

    @property
    def unparsable_records(self) -> int:
        """Reads that did not hold a ``prio,seq,usec,flags;text`` record (never expected)."""
        return self._unparsable

    def _require_fd(self) -> int:
        if self._fd is None:
            raise KernelLogUnavailable(f"cannot read {self.path}: the source is closed")
        return self._fd

    def _accept(self, record: KernelRecord) -> bool:
        """Count gaps and apply the cursor; True when the record is new."""
        seq = record.seq
        if seq is None:  # parse_kmsg_record always sets it; kept for the type checker
            return True
        if self._skip_through is not None and seq <= self._skip_through:
            return False
        if self._expected_seq is not None and seq > self._expected_seq:
            self._lost += seq - self._expected_seq
        self._expected_seq = seq + 1
        return True

    def read_available(self) -> list[KernelRecord]:
        """Every record readable now, oldest first; stops at ``EAGAIN``."""
        fd = self._require_fd()
        records: list[KernelRecord] = []
        while True:
            try:
                data = self._read(fd)
            except BlockingIOError:
                break
            except InterruptedError:
                continue
            except BrokenPipeError:
                # The kernel moved our position past overwritten records; the next
                # record's seq tells how many (counted in _accept).
                self._overwrites += 1
                continue
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    break
                raise KernelLogUnavailable(
                    f"cannot read {self.path}: {exc.strerror or exc}"
                ) from None
            if not data:  # a regular file standing in for the device: end of file
                break
            record = parse_kmsg_record(data.decode("utf-8", errors="replace"), self.boot_id)
            if record is None:
                self._unparsable += 1
                continue
            if self._accept(record):
                records.append(record)
        return records

    def wait(self, timeout_s: float) -> bool:
        """Block in ``poll()`` until a record is readable (True) or ``timeout_s`` passed."""
        self._require_fd()
        try:
            events = self._poll.poll(max(0, int(timeout_s * 1000)))
        except InterruptedError:
            return True
        return bool(events)

    def close(self) -> None:
        """Close the descriptor; safe to call twice."""
        if self._fd is not None:
            self._poll.unregister(self._fd)
            os.close(self._fd)
            self._fd = None
