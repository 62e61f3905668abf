"""The rig's drain: new requests go elsewhere, running ones finish, a load balancer sees it.

``fleetctl drain [--grace-s N]`` (``POST /api/v1/drain``) and, on its own, a confirmed
reboot begin one; ``fleetctl undrain`` (``POST /api/v1/undrain``) ends it. While it lasts
the guard answers every request, ``/health`` included, with a 503 ``draining`` in OpenAI's
shape and ``Retry-After`` (``serving.guard.errors.draining``): any load balancer's health
check takes the rig out, and a request it sent anyway is retried on another rig (nothing
reached the engine). The requests already past the guard's door run on; the drain is
*quiet* once the guard says it took the drain with none in flight, and *over its grace*
``grace_s`` after it began: a reboot's stop then proceeds either way.

Kept in the store (``drain`` document), so a drain survives a fleetd restart and shows on
every surface (status ``drain``, the dashboard, ``cmpfleet_drain_active``). The drain a
confirmed reboot began ends by itself once the host has booted again (its boot id
changed): the rig comes back to its balancer when its engine answers ``/health`` again. A
person's drain stays until ``undrain``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from daemon.store import Store, StoreError
from hwcheck.model import EventKind, Severity
from recovery.ports import BeforeReboot
from serving.errors import InvalidInput, Unavailable

log = logging.getLogger("fleetd.drain")

DRAIN_DOCUMENT = "drain"
MAX_GRACE_S = 24 * 3600.0
QUIET_POLL_S = 0.2


class DrainGuard(Protocol):
    """The guard's keeper as the drain sees it (``daemon.engine.guard.GuardService``)."""

    def sync_now(self) -> None:
        """Tell the guard now."""
        ...

    def in_flight(self) -> int | None:
        """Requests it serves, as last reported (None: no guard answers)."""
        ...

    def drain_taken(self) -> bool:
        """True once its last answer said it drains."""
        ...


@dataclass(frozen=True, slots=True)
class Drain:
    """One drain in force: when it began, its grace, who asked, why, and its boot."""

    since: float  # epoch seconds (it outlives fleetd: a wall clock, not a monotonic one)
    grace_s: float
    by: str
    reason: str
    boot_id: str
    until_reboot: bool  # begun by a confirmed reboot: ends once the host booted again

    def words(self) -> str:
        """Why, in the few words the guard's 503 carries."""
        return self.reason or f"drained by {self.by}"


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


class DrainKeeper:
    """The one holder of the drain: begun, ended, stored, told to the guard, waited on."""

    def __init__(
        self,
        store: Store,
        boot_id: Callable[[], str],
        default_grace_s: float,
        guard: DrainGuard | None,
        on_change: Callable[[], None],
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._boot_id = boot_id
        self.default_grace_s = default_grace_s
        self._guard = guard
        self._on_change = on_change
        self._wall = wall
        self._lock = threading.Lock()
        self._drain: Drain | None = self._load()
        self._pause = threading.Event()  # never set: waits that a test's clock does not fake

    def _load(self) -> Drain | None:
        try:
            document = self._store.get_document(DRAIN_DOCUMENT)
        except StoreError as exc:
            log.warning("the drain was not read: %s", exc)
            return None
        if not document or not document.get("since"):
            return None
        try:
            return Drain(
                since=float(document["since"]),
                grace_s=float(document["grace_s"]),
                by=str(document["by"]),
                reason=str(document.get("reason") or ""),
                boot_id=str(document["boot_id"]),
                until_reboot=bool(document.get("until_reboot")),
            )
        except (KeyError, TypeError, ValueError):
            log.warning("the stored drain is unreadable: ignored")
            return None

    def _save(self, drain: Drain | None) -> None:
        try:
            self._store.set_document(DRAIN_DOCUMENT, {} if drain is None else asdict(drain))
        except StoreError as exc:
            raise Unavailable(f"the drain could not be stored: {exc}") from None

    def _record(self, message: str) -> None:
        try:
            self._store.record_event(EventKind.DAEMON, Severity.INFO, message)
        except StoreError as exc:
            log.warning("drain event not stored: %s", exc)

    # -- what is in force ---------------------------------------------------------------
    def current(self) -> Drain | None:
        """The drain in force; a reboot's drain is over once the host booted again."""
        with self._lock:
            drain = self._drain
        if drain is None or not drain.until_reboot or drain.boot_id == self._boot_id():
            return drain
        with self._lock:
            if self._drain is not drain:
                return self._drain
            self._drain = None
        try:
            self._save(None)
        except Unavailable as exc:
            log.warning("%s", exc)
        self._record("drain ended: the host booted again after the reboot that began it")
        self._changed()
        return None

    def guard_words(self) -> str | None:
        """What the guard is told each tick: why it drains (None: it serves)."""
        drain = self.current()
        return None if drain is None else drain.words()

    def document(self) -> dict[str, Any]:
        """The status's ``drain`` block (``draining`` false and nulls when none)."""
        drain = self.current()
        in_flight = None if self._guard is None else self._guard.in_flight()
        if drain is None:
            return {
                "draining": False,
                "since": None,
                "grace_s": None,
                "grace_left_s": None,
                "by": None,
                "reason": None,
                "until_reboot": False,
                "in_flight": in_flight,
                "quiet": False,
            }
        left_s = max(0.0, drain.since + drain.grace_s - self._wall())
        return {
            "draining": True,
            "since": _iso(drain.since),
            "grace_s": drain.grace_s,
            "grace_left_s": round(left_s, 1),
            "by": drain.by,
            "reason": drain.reason or None,
            "until_reboot": drain.until_reboot,
            "in_flight": in_flight,
            "quiet": self._quiet(),
        }

    def active(self) -> bool:
        """True while a drain is in force (``/metrics``)."""
        return self.current() is not None

    # -- begin, end, wait ---------------------------------------------------------------
    def drain(
        self, grace_s: float | None, by: str, reason: str = "", until_reboot: bool = False
    ) -> dict[str, Any]:
        """Begin a drain (one in force is replaced); the status block."""
        grace = self.default_grace_s if grace_s is None else grace_s
        if not 0 <= grace <= MAX_GRACE_S:
            raise InvalidInput(f"grace_s {grace:g}: expected 0 to {MAX_GRACE_S:g} seconds")
        drain = Drain(self._wall(), float(grace), by, reason.strip(), self._boot_id(), until_reboot)
        with self._lock:  # a drain in force is replaced: its grace starts again from now
            try:
                self._save(drain)
            except Unavailable as exc:
                if not until_reboot:
                    raise
                # A reboot is often due when the disk is not well: it drains from memory
                # (the reboot ends it anyway) rather than refuse the reboot.
                log.warning("%s: the reboot drains all the same", exc)
            self._drain = drain
        self._record(
            f"drain begun by {by} (grace {drain.grace_s:g} s)"
            + (f": {drain.reason}" if drain.reason else "")
        )
        self._changed()
        return self.document()

    def undrain(self, by: str) -> dict[str, Any]:
        """End the drain in force (none: nothing changes); the status block."""
        with self._lock:
            was = self._drain
            if was is not None:
                self._save(None)
                self._drain = None
        if was is not None:
            self._record(f"drain ended by {by}")
            self._changed()
        return self.document()

    def before_reboot(self, actor: str) -> BeforeReboot:
        """A confirmed reboot's drain: begin it, wait until quiet or its grace is over.

        Returns the line the audit trail keeps (in ``BeforeReboot.words``). A rig without a guard (or one that does
        not answer) has no requests to wait on: the drain is still recorded and shown.
        """
        self.drain(None, actor, "the host reboots", until_reboot=True)
        drain = self.current()
        grace_s = 0.0 if drain is None else drain.grace_s
        started_s = time.monotonic()
        deadline_s = started_s + grace_s
        while not self._quiet():
            if self._guard is None or self._guard.in_flight() is None:
                return BeforeReboot("no guard answers: nothing to drain")
            if time.monotonic() >= deadline_s:
                return BeforeReboot(
                    f"drained for its grace of {grace_s:g} s; requests still running end"
                )
            self._pause.wait(QUIET_POLL_S)
        return BeforeReboot(f"drained in {time.monotonic() - started_s:.1f} s (no request running)")

    def _quiet(self) -> bool:
        guard = self._guard
        return guard is not None and guard.drain_taken() and guard.in_flight() == 0

    def _changed(self) -> None:
        if self._guard is not None:
            self._guard.sync_now()
        self._on_change()
