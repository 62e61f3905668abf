"""The SQLite file under the store: checked before it is touched, and watched by inode.

Two faults once blinded or damaged the history (issue 22):

- a ``fleet.db`` whose last page was corrupt was *modified* (the WAL switch, the
  migrations) before fleetd gave up, so the evidence a person needed was gone: the file
  is now opened read-only and ``PRAGMA quick_check``'d first, and one that fails is never
  written (``StoreError`` with how to move it aside);
- a ``fleet.db`` deleted (or replaced by ``mv``) while fleetd ran went unnoticed: the pool
  kept writing into the unlinked file, lost at the next restart. The file's (device,
  inode) is remembered at open and compared before every write unit (one ``stat``): a
  deleted file is started afresh (0600, migrated) and a replaced one is used once it
  passes the same check; one that does not is never written, and every write fails with
  one line saying why (the ``store`` check turns critical; the live picture goes on).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from daemon.store.db import StoreError

log = logging.getLogger("fleetd.store")

FILE_MODE = 0o600


def damaged_message(path: Path, why: str) -> str:
    """One line: what is wrong with ``path`` and how to move it aside (fleetd never does)."""
    return (
        f"{path} failed its integrity check ({why}); it was left untouched: move it aside, "
        f"e.g. mv {path} {path}.bad, and fleetd starts a fresh history"
    )


def quick_check(path: Path) -> str | None:
    """Why ``path`` is not a sound SQLite database, or None (absent or empty counts as sound).

    Opened read-only: the check itself never writes, not even the WAL switch
    every connection of the store makes. ``quick_check`` reads every page of every b-tree
    (it skips only the index-content cross-check), so a corrupt last page is found.
    """
    try:
        if path.stat().st_size == 0:
            return None
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot stat it: {exc.strerror or exc}"
    # No WAL beside it: ``immutable`` reads the file alone and creates no ``-shm``/``-wal``.
    # A WAL a crash left behind holds commits: read them too (read-only; SQLite may add
    # the ``-shm`` index beside it, never a byte of the database file).
    how = "mode=ro" if Path(f"{path}-wal").exists() else "immutable=1"
    try:
        conn = sqlite3.connect(f"file:{path}?{how}", uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.Error as exc:
        return str(exc)
    finally:
        conn.close()
    verdict = [str(row[0]) for row in rows]
    if verdict == ["ok"]:
        return None
    more = f" (+{len(verdict) - 1} more)" if len(verdict) > 1 else ""
    return f"quick_check: {verdict[0]}{more}"


@dataclass(frozen=True, slots=True)
class _Identity:
    device: int
    inode: int


def _identity(path: Path) -> _Identity | None:
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return _Identity(found.st_dev, found.st_ino)


class FileGuard:
    """Watches one SQLite file by inode; ``before_write`` reopens or refuses (thread-safe)."""

    def __init__(
        self, path: Path, release: Callable[[], None], migrate: Callable[[], None]
    ) -> None:
        """``release`` closes the pool's connections; ``migrate`` upgrades the file at ``path``."""
        self.path = path
        self._release = release
        self._migrate = migrate
        self._lock = threading.Lock()
        self._known = _identity(path)
        self._refusal: str | None = None
        self._notes: list[str] = []  # what changed, for an event in the store

    def before_write(self) -> None:
        """Raise ``StoreError`` when the file cannot be written safely; else return at once."""
        with self._lock:
            now = _identity(self.path)
            if now == self._known and now is not None:
                if self._refusal is None:
                    return
                raise StoreError(self._refusal)
            self._follow(now)
            if self._refusal is not None:
                raise StoreError(self._refusal)

    def take_notes(self) -> list[str]:
        """What the guard did since the last call (for an event in the reopened store)."""
        with self._lock:
            notes, self._notes = self._notes, []
            return notes

    def _follow(self, now: _Identity | None) -> None:
        """The file at the path is not the one the pool opened: start afresh or refuse.

        The pool's connections go first. SQLite does not checkpoint into a file that moved,
        so the old file's ``-wal``/``-shm`` stay at the path: they are removed, as they
        would otherwise be replayed into the new file (its pages written over by the old).
        """
        self._release()
        for sibling in ("-wal", "-shm"):
            try:
                Path(f"{self.path}{sibling}").unlink(missing_ok=True)
            except OSError as exc:
                self._refuse(
                    f"{self.path} was {'deleted' if now is None else 'replaced'} "
                    f"and the old {sibling} file beside it cannot be removed: {exc}"
                )
                return
        if now is None:
            what = "was deleted while fleetd ran: a fresh history was started in its place"
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
                os.close(fd)
            except OSError as exc:
                self._refuse(f"{self.path} was deleted and cannot be created again: {exc}")
                return
        else:
            why = quick_check(self.path)
            if why is not None:
                self._refuse(
                    f"{self.path} was replaced while fleetd ran by a file that failed its "
                    f"integrity check ({why}): nothing is written to it; move it aside "
                    f"(mv {self.path} {self.path}.bad) and fleetd starts a fresh history"
                )
                self._known = now
                return
            what = "was replaced while fleetd ran: the new file is used from now on"
        try:
            self._migrate()
        except StoreError as exc:
            self._refuse(f"{self.path} {what.split(':')[0]}, and cannot be used: {exc}")
            self._known = _identity(self.path)
            return
        self._known = _identity(self.path)
        self._refusal = None
        log.warning("%s %s", self.path, what)
        self._notes.append(f"{self.path.name} {what}")

    def _refuse(self, message: str) -> None:
        if message != self._refusal:
            log.error("%s: no write goes to it", message)
        self._refusal = message
