"""The reboot latch fleetd acts on: memory first, its own state file next, the store after.

A hardware fault must latch and stop the engine whatever the store's health: a database
locked by a backup for 45 s, a full disk or a corrupt ``fleet.db`` once delayed or lost
the latch (issue 22). So the latch in force lives in memory, in ``LatchState``, its one
holder (the status, ``/metrics``, the verdict and the alerts read it through
``in_force``; recovery reads and writes it through its latch port, ``StoreLatch``), is
written at once to ``latch.json`` beside the store (atomically and fsync'd, so a crash leaves the old or the new latch, whole), and
the store (its history, the alerts that read it) catches up on the store writer's
thread, again after every poll until it has it. A latch another process put in the store
still counts (it is adopted); a person's clear goes to the store first, so a clear that
cannot be recorded leaves the latch set (the safe side).
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from daemon.statedir import LATCH_FILE
from daemon.store import Latch, Store, StoreError
from daemon.store.keyvalue import ClearHow
from hwcheck.atomic import atomic_write
from hwcheck.model import Advice

log = logging.getLogger("fleetd.recovery")

__all__ = ["LATCH_FILE", "LatchFile", "LatchState"]


class LatchFile:
    """``latch.json``: this boot's latch, readable without the store."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self, boot_id: str) -> Latch | None:
        """The latch written in boot ``boot_id``; None when absent, unreadable or older."""
        try:
            document: Any = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.error("%s is unreadable (%s): the store's latch is used", self.path, exc)
            return None
        if not isinstance(document, dict) or document.get("boot_id") != boot_id:
            return None
        try:
            return Latch.from_json(document)
        except (KeyError, TypeError, ValueError) as exc:
            log.error("%s holds no latch (%s): the store's latch is used", self.path, exc)
            return None

    def write(self, latch: Latch, boot_id: str) -> None:
        """Replace the file (raises OSError: a read-only or full state dir)."""
        atomic_write(self.path, json.dumps({"boot_id": boot_id, **latch.to_dict()}) + "\n")

    def remove(self) -> None:
        """No latch (a clear, a new boot); an error is logged (the boot id voids it anyway)."""
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            log.error("%s could not be removed: %s", self.path, exc)


class LatchState:
    """The latch in force (thread-safe; no store call is made under its lock)."""

    def __init__(self, file: LatchFile, store: Store) -> None:
        self._file = file
        self._store = store
        self._lock = threading.Lock()
        # Orders the two writers of the store's latch (a person's clear, the writer's
        # catch-up): a catch-up that read the latch before a clear must not write it into
        # the store after the clear's store write yet check the memory before the clear's
        # memory write, or the store keeps a latch the next read adopts again (a cleared
        # Xid latch came back by itself under load). Never taken under ``_lock``. Reentrant:
        # a write that finds ``fleet.db`` started afresh calls ``_store_afresh`` (a catch-up)
        # in its own thread, under this lock.
        self._store_writes = threading.RLock()
        self._latch: Latch | None = None
        self._generation = 0  # moves on every set, clear and new boot: a stale read loses
        self._boot_id = ""
        store.add_fresh_listener(self._store_afresh)

    def _store_afresh(self) -> None:
        """A fleet.db started afresh gets this boot and the latch in force written again.

        Without the boot, the next start took itself for the first on this state dir (a
        reboot in between would go unseen); the latch follows at once, not after a poll.
        """
        with self._lock:
            boot_id = self._boot_id
        if boot_id:
            try:
                self._store.record_boot(boot_id)
            except StoreError as exc:
                log.warning("this boot is not in the new store yet: %s", exc)
        self.catch_up()

    def in_force(self) -> Latch | None:
        """The latch in force, from memory (never waits on the store)."""
        with self._lock:
            return self._latch

    def load(self, boot_id: str) -> Latch | None:
        """At start: this boot's latch from the file, else the store's (then the file has it)."""
        live = self._file.load(boot_id)
        stored = self._read_store()
        with self._lock:
            self._boot_id = boot_id
            self._generation += 1
        if live is None and stored is not None:
            live = stored
            self._write_file(live)
        with self._lock:
            self._latch = live
        return live

    def new_boot(self, boot_id: str) -> None:
        """A reboot cleared the latch (the store's in the same step as the boot id)."""
        with self._lock:
            self._boot_id = boot_id
            self._generation += 1
            self._latch = None
        self._file.remove()

    def latch(self) -> Latch | None:
        """The latch in force: this process's, else one another process stored."""
        with self._lock:
            live, generation = self._latch, self._generation
        if live is not None:
            return live
        stored = self._read_store()
        if stored is not None:
            self._adopt(stored, generation)
        return stored

    def set(self, reason: str, source: str, advice: Advice, card: int | None = None) -> Latch:
        """Set it now, in memory and in the file (a second fault keeps the first)."""
        with self._lock:
            if self._latch is not None:
                return self._latch
            latch = Latch(reason, source, datetime.now(UTC), advice, card)
            self._latch = latch
            self._generation += 1
        self._write_file(latch)
        return latch

    def clear(self, reason: str, by: str, how: ClearHow) -> bool:
        """A person's clear: the store records it first (``StoreError`` leaves it set)."""
        with self._store_writes:
            cleared = self._store.clear_latch(reason, by, how) is not None
            with self._lock:
                was_live = self._latch is not None
                self._latch = None
                self._generation += 1
        self._file.remove()
        return cleared or was_live

    def catch_up(self) -> None:
        """The store's latch made equal to the one in force (the store writer's job).

        Never raises: a store that still cannot write is tried again after the next poll.
        """
        with self._store_writes:
            self._catch_up()

    def _catch_up(self) -> None:
        with self._lock:
            generation, live = self._generation, self._latch
        try:
            if live is None:
                stored = self._store.get_latch()
                if stored is not None:
                    self._adopt(stored, generation)
                return
            self._store.set_latch(
                live.reason, live.source, live.advice, now=live.since, card=live.card
            )
            if self.in_force() is None:  # a person cleared it meanwhile: so does the store
                self._store.clear_latch("cleared while the store caught up", "fleetd", "operator")
        except StoreError as exc:
            log.warning("the store does not have the latch yet (%s): retried after a poll", exc)

    def _adopt(self, stored: Latch, generation: int) -> None:
        """A latch another process stored, unless ours moved since it was read."""
        with self._lock:
            if generation != self._generation or self._latch is not None:
                return
            self._latch = stored
            self._generation += 1
        self._write_file(stored)

    def _read_store(self) -> Latch | None:
        try:
            return self._store.get_latch()
        except StoreError as exc:
            log.warning("the store's latch could not be read (%s): the live one holds", exc)
            return None

    def _write_file(self, latch: Latch) -> None:
        try:
            self._file.write(latch, self._boot_id)
        except OSError as exc:
            log.error(
                "the latch could not be written to %s (%s): it holds in memory",
                self._file.path,
                exc,
            )
