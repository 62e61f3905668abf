"""Follow the engine's log file: an in-memory tail, live followers, size-bounded rotation.

Why a file and not a pipe: the engine must outlive fleetd (a cold start costs 20 to 45
minutes), and a pipe dies with the process that reads it. So the launcher points the
engine's stdout and stderr straight at ``engine.log`` in the state dir (append mode) and
this module *tails* that file; a restarted fleetd opens the same file, loads its last lines
as history and carries on reading.

Rotation is copy-truncate: when the file passes ``max_bytes`` it is copied to
``engine.log.1`` (older copies shift up to ``backups``) and truncated in place, because the
engine keeps its own descriptor open and cannot be told to reopen. The trade-off, accepted:
lines the engine writes between the end of the copy and the truncation are lost (a window of
microseconds); the engine's ``O_APPEND`` descriptor then writes from the new end of file.

vLLM's progress bars (tqdm) separate their updates with carriage returns, which split lines
too: the last update is the progress shown while the engine starts.

Every line is masked as it is read (``KnownSecrets``: the values fleetd passed as secrets,
URL passwords, bearer credentials), so no view of the capture (the tail, followers, the
last line, a crash's evidence) ever holds a known secret; the file itself is the engine's
own output and keeps what the engine wrote (it is 0600 in the state dir).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import re
import shutil
import threading
from collections import deque
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from types import TracebackType

from hwcheck.threads import CrashReport, ServiceThread
from serving.recipe.masking import KnownSecrets, mask_argv
from serving.runtime.classify import LAUNCH_MARKER_PREFIX
from serving.runtime.provenance import printable

_LOG = logging.getLogger(__name__)


_NEWLINES = re.compile(rb"\r\n|\r|\n")
_MAX_LINE_BYTES = 64 * 1024
_READ_CHUNK_BYTES = 1024 * 1024


def launch_marker(when: datetime, argv: tuple[str, ...] | list[str]) -> str:
    """The line written into the log before a launch (lets a restarted fleetd find it).

    Secrets are masked: the log is served to whoever holds the token and read by hand.
    """
    shown = " ".join(mask_argv(argv))
    return f"{LAUNCH_MARKER_PREFIX}{when.isoformat(timespec='seconds')}: {shown}"


class LogSubscription:
    """Lines that arrive after :meth:`LogCapture.subscribe`, for ``fleetctl logs --follow``.

    Bounded: a follower that stops reading loses lines (counted in ``dropped``) instead of
    making the engine's log reader wait.
    """

    def __init__(self, capture: LogCapture, max_queued: int) -> None:
        self._capture = capture
        self._queue: queue.Queue[str] = queue.Queue(maxsize=max_queued)
        self.dropped = 0

    def offer(self, line: str) -> None:
        """Queue one line, dropping it if this follower is too far behind."""
        try:
            self._queue.put_nowait(line)
        except queue.Full:
            self.dropped += 1

    def get(self, timeout_s: float | None = None) -> str | None:
        """The next line, or ``None`` when none arrived within ``timeout_s``."""
        try:
            return self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def close(self) -> None:
        """Stop receiving lines."""
        self._capture.unsubscribe(self)

    def __enter__(self) -> LogSubscription:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


LAST_LINE_CHARS = 1000  # the progress line: a terminal's width is far less


class LogCapture:
    """Tails one log file into memory; thread-safe; rotates the file by size.

    ``open()`` loads the last ``history_bytes`` of the file and starts a reader thread that
    polls every ``poll_interval_s``; :meth:`poll` reads synchronously (the supervisor calls
    it before classifying an exit, so the last lines are in the tail).
    """

    def __init__(
        self,
        path: Path,
        *,
        max_bytes: int = 64 * 1024 * 1024,
        backups: int = 3,
        tail_lines: int = 2000,
        poll_interval_s: float = 0.25,
        history_bytes: int = 256 * 1024,
        secrets: KnownSecrets | None = None,
        on_crash: CrashReport | None = None,
    ) -> None:
        if max_bytes <= 0 or backups < 0 or tail_lines <= 0 or poll_interval_s <= 0:
            raise ValueError(
                "log capture needs max_bytes > 0, backups >= 0, tail_lines > 0, poll_interval_s > 0"
            )
        self.path = path
        self.secrets = KnownSecrets() if secrets is None else secrets
        self._max_bytes = max_bytes
        self._backups = backups
        self._poll_interval_s = poll_interval_s
        self._history_bytes = history_bytes
        self._lock = threading.Lock()
        self._tail: deque[tuple[int, str]] = deque(maxlen=tail_lines)
        self._seq = 0
        self._session_start = 0
        self._offset = 0
        self._inode: int | None = None
        self._partial = b""
        self._subscribers: list[LogSubscription] = []
        self._reader = ServiceThread.every(
            f"logcapture:{path.name}",
            poll_interval_s,
            self._poll_logged,
            on_crash=on_crash,
            log=_LOG,
        )

    # -- lifecycle -------------------------------------------------------------------

    def open(self) -> None:
        """Load recent history from the file and start following it."""
        with self._lock:
            self._load_history()
        if not self._reader.started or self._reader.stopping:
            self._reader.start()

    def close(self) -> None:
        """Stop the reader thread (the file and the engine are left alone)."""
        self._reader.stop(5)

    def _poll_logged(self) -> None:
        """The reader thread's tick: a read that fails is logged, the next one tried."""
        try:
            self.poll()
        except OSError:
            _LOG.exception("reading the engine log %s failed", self.path)

    # -- reading ---------------------------------------------------------------------

    def poll(self) -> int:
        """Read whatever the file gained since the last read; return how many lines."""
        with self._lock:
            try:
                stat = os.stat(self.path)
            except FileNotFoundError:
                return 0
            if stat.st_ino != self._inode:
                # A new file (first launch, or someone removed the old one): read from 0.
                self._inode = stat.st_ino
                self._offset = 0
                self._partial = b""
            elif stat.st_size < self._offset:
                # Truncated by someone else: start again from the beginning.
                self._offset = 0
                self._partial = b""
            count = self._read_to(stat.st_size)
            if stat.st_size > self._max_bytes:
                count += self._rotate()
            return count

    def _read_to(self, end: int) -> int:
        count = 0
        if end <= self._offset:
            return 0
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            while self._offset < end:
                chunk = handle.read(min(_READ_CHUNK_BYTES, end - self._offset))
                if not chunk:
                    break
                self._offset += len(chunk)
                count += self._ingest(chunk)
        return count

    def _ingest(self, chunk: bytes) -> int:
        data = self._partial + chunk
        # Hold back a trailing "\r": it may be the first half of a "\r\n" split across reads.
        held = b""
        if data.endswith(b"\r"):
            data, held = data[:-1], b"\r"
        pieces = _NEWLINES.split(data)
        rest = pieces.pop()
        if len(rest) > _MAX_LINE_BYTES:
            pieces.append(rest)
            rest = b""
        self._partial = rest + held
        count = 0
        for raw in pieces:
            if raw.strip():
                self._add(self.secrets.mask(raw.decode("utf-8", errors="replace")))
                count += 1
        return count

    def _add(self, line: str) -> None:
        self._seq += 1
        self._tail.append((self._seq, line))
        for subscriber in self._subscribers:
            subscriber.offer(line)

    def _load_history(self) -> None:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return
        self._inode = stat.st_ino
        start = max(0, stat.st_size - self._history_bytes)
        with self.path.open("rb") as handle:
            handle.seek(start)
            data = handle.read(stat.st_size - start)
        if start > 0:
            # Drop the first, probably partial, line.
            _, _, data = data.partition(b"\n")
        self._offset = stat.st_size
        self._partial = b""
        for raw in _NEWLINES.split(data):
            if raw.strip():
                self._seq += 1
                line = self.secrets.mask(raw.decode("utf-8", errors="replace"))
                self._tail.append((self._seq, line))
        self._mark_last_launch()

    def _mark_last_launch(self) -> None:
        for seq, line in reversed(self._tail):
            if line.startswith(LAUNCH_MARKER_PREFIX):
                self._session_start = seq
                return

    # -- rotation --------------------------------------------------------------------

    def _backup_path(self, number: int) -> Path:
        return self.path.with_name(f"{self.path.name}.{number}")

    def _rotate(self) -> int:
        """Copy-truncate the file (see the module docstring for the lost-lines window)."""
        if self._backups == 0:
            os.truncate(self.path, 0)
            self._offset = 0
            return 0
        oldest = self._backup_path(self._backups)
        with contextlib.suppress(FileNotFoundError):
            oldest.unlink()
        for number in range(self._backups - 1, 0, -1):
            source = self._backup_path(number)
            if source.exists():
                source.rename(self._backup_path(number + 1))
        first = self._backup_path(1)
        os.close(os.open(first, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        os.chmod(first, 0o600)  # copyfile keeps this mode; its own would follow the umask
        shutil.copyfile(self.path, first)
        # Lines written while copying are in the copy: read them from there before truncating.
        copied = first.stat().st_size
        count = 0
        if copied > self._offset:
            with first.open("rb") as handle:
                handle.seek(self._offset)
                count = self._ingest(handle.read(copied - self._offset))
        os.truncate(self.path, 0)
        self._offset = 0
        return count

    # -- views -----------------------------------------------------------------------

    def tail(self, n: int) -> list[str]:
        """The last ``n`` lines (fewer if fewer were seen)."""
        if n <= 0:
            return []
        with self._lock:
            return [line for _, line in list(self._tail)[-n:]]

    @property
    def last_line(self) -> str | None:
        """The most recent line: the progress shown while the engine starts.

        A progress bar's update in flight (no line end yet) counts as the latest line.
        Printable only: ``fleetctl start`` rewrites it in place on a terminal, where an
        engine's escape sequence would drive the terminal (issue 36).
        """
        with self._lock:
            pending = self._partial.rstrip(b"\r").strip()
            if pending:
                line = self.secrets.mask(pending.decode("utf-8", errors="replace"))
            elif self._tail:
                line = self._tail[-1][1]
            else:
                return None
        return printable(line, LAST_LINE_CHARS)

    def begin_session(self) -> None:
        """Read what is pending, then count only later lines as the current launch's."""
        self.poll()
        with self._lock:
            self._session_start = self._seq + 1

    def begin_session_at_last_launch(self) -> None:
        """For an adopted engine: its lines start at the last launch marker in the history."""
        self.poll()
        with self._lock:
            self._mark_last_launch()

    def session_tail(self, n: int) -> list[str]:
        """The last ``n`` lines of the current launch (what a crash is classified from)."""
        with self._lock:
            lines = [line for seq, line in self._tail if seq >= self._session_start]
        return lines[-n:] if n > 0 else []

    # -- followers -------------------------------------------------------------------

    def subscribe(self, backlog: int = 0, max_queued: int = 10_000) -> LogSubscription:
        """A follower that first gets the last ``backlog`` lines, then every new one."""
        subscription = LogSubscription(self, max_queued)
        with self._lock:
            for _, line in list(self._tail)[-backlog:] if backlog > 0 else []:
                subscription.offer(line)
            self._subscribers.append(subscription)
        return subscription

    def unsubscribe(self, subscription: LogSubscription) -> None:
        """Forget one follower (closing twice is harmless)."""
        with self._lock, contextlib.suppress(ValueError):
            self._subscribers.remove(subscription)

    def follow(
        self, stopped: Callable[[], bool], backlog: int = 0, wake_s: float = 0.25
    ) -> Iterator[str]:
        """Yield lines as they arrive until ``stopped()`` is true (checked every ``wake_s``)."""
        with self.subscribe(backlog) as subscription:
            while not stopped():
                line = subscription.get(timeout_s=wake_s)
                if line is not None:
                    yield line
