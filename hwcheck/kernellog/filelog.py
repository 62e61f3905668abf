"""A kernel log kept in a text file: followed like ``tail -F`` and appended like the kernel.

The simulated rig writes its kernel log as ``/dev/kmsg`` records into a file in the state
dir (``KmsgFileWriter``), and the daemon follows it with ``FileSource`` through the same
parser, cursor and follower as a real rig. ``FileSource`` also reads plain saved logs
(dmesg, journalctl text): a line that is not a kmsg record becomes a record without seq,
whose writer is read by ``origin.read_log_line`` like everywhere else.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

from hwcheck.kernellog.errors import KernelLogUnavailable
from hwcheck.kernellog.file_watch import FileWatch, open_watch
from hwcheck.kernellog.kmsg_format import KERN_WARNING_PRIO, format_kmsg_record, parse_kmsg_record
from hwcheck.kernellog.origin import read_log_line
from hwcheck.kernellog.records import KernelLogCursor, KernelRecord
from hwcheck.regular_file import open_regular_fd

_READ_CHUNK_BYTES = 1 << 20
_TAIL_PROBE_BYTES = 1 << 16
DEFAULT_POLL_INTERVAL_S = 0.05
# Where inotify cannot watch the file (``file_watch``), a quiet file is looked at less and
# less often, up to this: a look 20 times a second cost an idle fleetd a quarter of its CPU.
QUIET_POLL_INTERVAL_S = 0.4
# With a watch, the file is still looked at this often: what inotify may not report (a
# network file system's writes from another host) is then seen within it.
WATCHED_LOOK_S = 1.0


class FileSource:
    """A ``KernelLogSource`` following a text file the way ``tail -F`` does.

    - The file may not exist yet: it is picked up, from its start, when it appears.
    - Truncation (size below our position) restarts from the start of the file.
    - Replacement (a new inode at ``path``) finishes the old file, then reads the new one.
    - A last line without its newline is held until the newline arrives.
    - Lines that are ``/dev/kmsg`` records get their seq and honour the cursor as on
      ``/dev/kmsg`` (same ``boot_id``: skip ``seq <= last_seq``); continuation lines
      (starting with a space) after a record are dictionary entries and are dropped.
    - ``from_start=False`` without a cursor skips what the file already holds.
    """

    name = "file"

    def __init__(
        self,
        path: str | Path,
        cursor: KernelLogCursor | None,
        boot_id: str,
        *,
        from_start: bool = True,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
    ) -> None:
        self.path = Path(path)
        self.boot_id = boot_id
        self._skip_through = (
            cursor.last_seq if cursor is not None and cursor.boot_id == boot_id else None
        )
        self._poll_interval_s = poll_interval_s
        self._interval_s = poll_interval_s  # grows while the file stays quiet
        self._watch: FileWatch | None = None
        self._watch_tried = False  # opened at the first wait: a reader that never waits
        self._fd: int | None = None
        self._identity: tuple[int, int] | None = None
        self._position = 0
        self._partial = b""
        self._after_kmsg_record = False
        self._closed = False
        if self._open_current() and cursor is None and not from_start:
            self._position = os.lseek(self._require_fd(), 0, os.SEEK_END)

    @property
    def lost_records(self) -> int:
        """A file never overwrites records: always 0."""
        return 0

    def _require_fd(self) -> int:
        if self._fd is None:
            raise KernelLogUnavailable(f"cannot read {self.path}: not open")
        return self._fd

    def _open_current(self) -> bool:
        """Open the file now at ``path`` (from its start); False when there is none yet."""
        try:
            # A regular file only: a FIFO or a device named as the log would block or flood.
            fd = open_regular_fd(self.path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise KernelLogUnavailable(f"cannot read {self.path}: {exc.strerror or exc}") from None
        stat = os.fstat(fd)
        self._fd = fd
        self._identity = (stat.st_dev, stat.st_ino)
        self._position = 0
        self._partial = b""
        self._after_kmsg_record = False
        return True

    def _close_current(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None
        self._identity = None

    def _path_identity(self) -> tuple[int, int, int] | None:
        """``(device, inode, size)`` of the file now at ``path``; None if there is none."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return None
        return stat.st_dev, stat.st_ino, stat.st_size

    def _line_record(self, line: str) -> KernelRecord | None:
        """One complete line as a record, or None when it is skipped."""
        if line.startswith(" ") and self._after_kmsg_record:
            return None
        record = parse_kmsg_record(line, self.boot_id)
        if record is None:
            self._after_kmsg_record = False
            return read_log_line(line, self.boot_id)
        self._after_kmsg_record = True
        if (
            self._skip_through is not None
            and record.seq is not None
            and record.seq <= self._skip_through
        ):
            return None
        return record

    def _records_from(self, data: bytes, final: bool) -> list[KernelRecord]:
        """Complete lines of ``self._partial + data``; ``final`` also flushes the tail."""
        *lines, self._partial = (self._partial + data).split(b"\n")
        if final and self._partial:
            lines.append(self._partial)
            self._partial = b""
        records: list[KernelRecord] = []
        for raw in lines:
            record = self._line_record(raw.decode("utf-8", errors="replace"))
            if record is not None:
                records.append(record)
        return records

    def _drain(self, final: bool = False) -> list[KernelRecord]:
        """Everything appended to the open file since the last read."""
        fd = self._require_fd()
        records: list[KernelRecord] = []
        while True:
            chunk = os.pread(fd, _READ_CHUNK_BYTES, self._position)
            if not chunk:
                break
            self._position += len(chunk)
            records.extend(self._records_from(chunk, final=False))
        if final:
            records.extend(self._records_from(b"", final=True))
        return records

    def read_available(self) -> list[KernelRecord]:
        """New complete lines, following truncation and replacement; never blocks."""
        if self._closed:
            raise KernelLogUnavailable(f"cannot read {self.path}: the source is closed")
        records: list[KernelRecord] = []
        now = self._path_identity()
        if self._fd is not None:
            if now is None or (now[0], now[1]) != self._identity:
                # Rotated or deleted: what was written to the old file still counts,
                # including a last line that will never get its newline.
                records.extend(self._drain(final=True))
                self._close_current()
            elif os.fstat(self._fd).st_size < self._position:
                self._position = 0
                self._partial = b""
                self._after_kmsg_record = False
        if self._fd is None and (now is None or not self._open_current()):
            return records
        records.extend(self._drain())
        return records

    def _changed(self) -> bool:
        now = self._path_identity()
        if self._fd is None:
            return now is not None
        if now is None or (now[0], now[1]) != self._identity:
            return True
        return now[2] != self._position

    def wait(self, timeout_s: float) -> bool:
        """Wait until the file's size or inode changes; False after ``timeout_s``.

        Woken by inotify where it watches the file's folder (and a look every
        ``WATCHED_LOOK_S`` besides). Else polled: every ``poll_interval_s`` after a change,
        and while it stays quiet the gap doubles, up to ``QUIET_POLL_INTERVAL_S`` (or
        ``poll_interval_s`` when that is longer).
        """
        deadline = time.monotonic() + max(0.0, timeout_s)
        watch = self._file_watch()
        while True:
            if self._changed():
                self._interval_s = self._poll_interval_s
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if watch is not None and watch.alive:
                watch.wait(min(WATCHED_LOOK_S, remaining))
                continue
            time.sleep(min(self._interval_s, remaining))
            self._interval_s = min(
                self._interval_s * 2, max(QUIET_POLL_INTERVAL_S, self._poll_interval_s)
            )

    def _file_watch(self) -> FileWatch | None:
        if not self._watch_tried and not self._closed:
            self._watch_tried = True
            self._watch = open_watch(self.path)
        return self._watch

    def close(self) -> None:
        """Close the file (and its watch); safe to call twice."""
        self._close_current()
        if self._watch is not None:
            self._watch.close()
        self._closed = True


def _default_clock_usec() -> int:
    """Microseconds on CLOCK_MONOTONIC: the kernel's own timestamp base."""
    return time.monotonic_ns() // 1000


def _last_record_in(fd: int) -> tuple[int, int] | None:
    """``(seq, usec)`` of the file's last kmsg record (only its tail is read when possible)."""
    size = os.fstat(fd).st_size
    start = max(0, size - _TAIL_PROBE_BYTES)
    while True:
        tail = os.pread(fd, size - start, start).decode("utf-8", errors="replace")
        lines = tail.split("\n")
        if start > 0:
            lines = lines[1:]  # the first one may be cut
        for line in reversed(lines):
            record = parse_kmsg_record(line)
            if record is not None and record.seq is not None:
                return record.seq, record.timestamp_usec or 0
        if start == 0:
            return None
        start = 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class KmsgFileWriter:
    """Appends ``/dev/kmsg``-format records to a file with increasing seq and usec.

    Each append takes an exclusive ``flock`` on the file and reads its last record, so two
    writers (the simulator and a test, two processes) never reuse a seq, and a reopened
    file continues its numbering. One file holds one (simulated) boot.
    """

    def __init__(
        self,
        path: str | Path,
        boot_id: str,
        clock_usec: Callable[[], int] = _default_clock_usec,
    ) -> None:
        self.path = Path(path)
        self.boot_id = boot_id
        self._clock_usec = clock_usec

    def append(self, text: str, prio: int = KERN_WARNING_PRIO, usec: int | None = None) -> int:
        """Append one record and return its seq (``usec`` defaults to the clock, kept rising)."""
        if prio < 0:
            raise ValueError(f"kmsg prio must be >= 0, got {prio}")
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            last = _last_record_in(fd)
            seq = 0 if last is None else last[0] + 1
            wanted_usec = self._clock_usec() if usec is None else usec
            if last is not None:
                wanted_usec = max(wanted_usec, last[1] + 1)
            data = format_kmsg_record(text, seq, max(0, wanted_usec), prio).encode("utf-8")
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # never glue a record onto a torn last line
            _write_all(fd, data)
        finally:
            os.close(fd)  # also releases the lock
        return seq
