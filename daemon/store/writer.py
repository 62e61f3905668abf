"""The daemon's history written on its own thread: a failing store never freezes polls.

Why: with the disk full every write fails at once, and while another process holds the
SQLite write lock every write waits out the 30 s busy timeout. Done on the poll thread,
the first stopped the polls from reaching memory (status kept the old picture as "OK")
and the second froze the poller. Here the poll hands its writes over as one job; the
in-memory picture and the API stay current, and ``reading()`` is what the ``store`` check
(``hwcheck.checks.store``) judges: critical while writes fail or one has waited too long.

Bounded: while the store is down, at most ``max_pending`` jobs wait; older ones are
dropped (and counted), newest kept, so memory stays flat however long the outage.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from daemon.store import StoreError, mask_url
from hwcheck.checks.readings import StoreFailure, StoreReading
from hwcheck.threads import CrashReport, ServiceThread, Wake

log = logging.getLogger("fleetd.store")

DEFAULT_MAX_PENDING = 300


@dataclass(frozen=True, slots=True)
class _Failure:
    """Why writes fail now, since when, and how many jobs were lost meanwhile."""

    error: str
    since_s: float


# What a failing write says, and what happened: each gets its own remedy.
_FULL_WORDS = ("full", "no space left", "disk i/o error")
_LOCK_WORDS = ("locked", "busy")
_FILE_WORDS = ("was deleted", "was replaced", "integrity check")


def store_remedy(url: str, error: str = "") -> str:
    """What to do when the store at ``url`` cannot write, for the ``error`` it gave.

    Names what happened (a full disk, another process's write lock, a ``fleet.db``
    deleted or replaced under fleetd) and the file or server; a deleted file once got
    "free disk space" for a foreign-key failure that was no disk's fault.
    """
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return f"check the database server and its disk ({mask_url(url)})"
    path = Path(url[len(prefix) :])
    said = error.lower()
    full = f"free disk space where {path} lives (df -h {path.parent})"
    locked = f"stop the process that holds {path}'s write lock (fuser -v {path})"
    if any(words in said for words in _FILE_WORDS):
        return (
            f"{path} was deleted or replaced while fleetd ran and cannot be used: move a "
            f"damaged file aside (mv {path} {path}.bad) and check that {path.parent} is "
            "writable with space left; fleetd then starts a fresh history"
        )
    if any(words in said for words in _FULL_WORDS):
        return full
    if any(words in said for words in _LOCK_WORDS):
        return locked
    return f"{full}; if another process holds its write lock, stop it (fuser -v {path})"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else exc.__class__.__name__


class StoreWriter:
    """One thread draining a bounded queue of store jobs; tracks whether writes work."""

    def __init__(
        self,
        remedy: str | Callable[[str], str],
        *,
        stuck_after_s: float,
        max_pending: int = DEFAULT_MAX_PENDING,
        clock: Callable[[], float] = time.monotonic,
        on_crash: CrashReport | None = None,
    ) -> None:
        self._remedy = remedy
        self._stuck_after_s = stuck_after_s
        self._max_pending = max(1, max_pending)
        self._clock = clock
        self._cond = threading.Condition()
        self._jobs: deque[tuple[Callable[[], object], bool]] = deque()
        self._busy_since_s: float | None = None
        self._failure: _Failure | None = None
        self._dropped = 0
        self._closed = False
        self._thread = ServiceThread("store-writer", self._run, on_crash=on_crash, log=log)
        self._thread.start()

    # -- producers -----------------------------------------------------------------------
    def submit(self, job: Callable[[], object], *, writes: bool = False) -> None:
        """Queue ``job``; when the queue is full the oldest job is dropped and counted.

        Only a job that ``writes`` ends an outage by succeeding: reads still work on a full
        disk or under another process's write lock, so a read that succeeds (the latch
        mirror after every poll) proves nothing and must not turn the check green.
        """
        with self._cond:
            if self._closed:
                return
            if len(self._jobs) >= self._max_pending:
                self._jobs.popleft()
                self._dropped += 1
            self._jobs.append((job, writes))
            self._cond.notify_all()

    def flush(self, timeout_s: float) -> bool:
        """Wait until every queued job has run (or failed); False on timeout."""
        deadline_s = time.monotonic() + timeout_s
        with self._cond:
            while self._jobs or self._busy_since_s is not None:
                left_s = deadline_s - time.monotonic()
                if left_s <= 0:
                    return False
                self._cond.wait(left_s)
            return True

    def close(self, timeout_s: float) -> None:
        """Run what is queued (up to ``timeout_s``), then stop the thread."""
        self.flush(timeout_s)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(1.0)

    # -- the store check's reading ---------------------------------------------------------
    def reading(self) -> StoreReading:
        """What the ``store`` check judges: failing writes, the write in flight, jobs dropped."""
        now_s = self._clock()
        with self._cond:
            failure, busy_since_s, dropped = self._failure, self._busy_since_s, self._dropped
        return StoreReading(
            # What to do names what happened (a full disk, a lock, a deleted fleet.db).
            remedy=self._remedy_for("" if failure is None else failure.error),
            stuck_after_s=self._stuck_after_s,
            failure=None
            if failure is None
            else StoreFailure(failure.error, now_s - failure.since_s),
            waiting_s=None if busy_since_s is None else now_s - busy_since_s,
            dropped=dropped,
        )

    def _remedy_for(self, error: str) -> str:
        return self._remedy(error) if callable(self._remedy) else self._remedy

    def record_failure(self, exc: BaseException) -> None:
        """A write done elsewhere (not through the queue) failed: the store is down."""
        with self._cond:
            if self._failure is None:
                self._failure = _Failure(_one_line(exc), self._clock())

    # -- the thread ----------------------------------------------------------------------
    def _run(self, _wake: Wake) -> None:
        """Drain the queue (waiting on its condition) until closed and empty."""
        while True:
            with self._cond:
                while not self._jobs and not self._closed:
                    self._cond.wait()
                if not self._jobs:
                    return
                job, writes = self._jobs.popleft()
                self._busy_since_s = self._clock()
            try:
                job()
            except StoreError as exc:
                self.record_failure(exc)
            except Exception as exc:  # a bug in a job: same outage handling, with a trace
                if self._failure is None:
                    log.exception("a store job failed")
                self.record_failure(exc)
            else:
                if writes:
                    with self._cond:
                        self._failure = None
            finally:
                with self._cond:
                    self._busy_since_s = None
                    self._cond.notify_all()

    def recovered(self) -> int:
        """Forget the dropped count after an outage was reported; the count it had."""
        with self._cond:
            dropped, self._dropped = self._dropped, 0
            return dropped
