"""The daemon's in-memory view of the rig: the latest samples, check results and Xids.

The poll job and the kernel-log follower write it; the API reads a consistent copy
(``view()``) under a lock, so no request ever waits on NVML.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from hwcheck.model import CheckResult, ClassifiedXid, RigSnapshot, xid_key
from hwcheck.verdict import RigVerdict


@dataclass(frozen=True)
class MonitorView:
    """A consistent copy of what the monitor knows."""

    samples: tuple[RigSnapshot, ...]
    results: tuple[CheckResult, ...]
    xids: tuple[ClassifiedXid, ...]
    boot_id: str
    polls: int
    last_poll_monotonic_s: float | None
    last_poll_error: str | None
    nvml_down: CheckResult | None = None  # the critical ``nvml`` result while NVML is down
    last_poll_age_s: float | None = None  # seconds since the last complete poll
    stale_reason: str | None = None  # set when that poll is too old to judge the rig by
    verdict: RigVerdict | None = None  # the rig's one verdict, judged by fleetd (per poll)

    @property
    def latest(self) -> RigSnapshot | None:
        """The newest snapshot, if any poll completed."""
        return self.samples[-1] if self.samples else None


class RigMonitor:
    """Thread-safe holder of recent readings (a bounded window, for sustained checks)."""

    def __init__(
        self, boot_id: str, sample_window: int, stale_after_s: float = float("inf")
    ) -> None:
        self._lock = threading.Lock()
        self._stale_after_s = stale_after_s
        self._samples: deque[RigSnapshot] = deque(maxlen=max(sample_window, 1))
        self._results: tuple[CheckResult, ...] = ()
        self._xids: list[ClassifiedXid] = []
        self._xid_keys: set[str] = set()
        self._boot_id = boot_id
        self._polls = 0
        self._last_poll_s: float | None = None
        self._last_error: str | None = None
        self._attempt_s: float | None = None
        self._nvml_down: CheckResult | None = None
        self._nvml_down_since_s = 0.0
        self._verdict: RigVerdict | None = None

    def add_sample(self, snapshot: RigSnapshot) -> tuple[RigSnapshot, ...]:
        """Append a poll's snapshot; returns the window the checks judge."""
        with self._lock:
            self._samples.append(snapshot)
            return tuple(self._samples)

    def set_results(self, results: Sequence[CheckResult]) -> None:
        """Store a poll's check results and mark the poll complete."""
        with self._lock:
            self._results = tuple(results)
            self._polls += 1
            self._last_poll_s = time.monotonic()
            self._attempt_s = self._last_poll_s
            self._last_error = None

    def set_verdict(self, verdict: RigVerdict) -> None:
        """The rig's verdict, judged after each poll and each latch or engine change."""
        with self._lock:
            self._verdict = verdict

    def replace_results(self, results: Sequence[CheckResult]) -> None:
        """The checks judged again on the same readings (not a poll: nothing is counted)."""
        with self._lock:
            self._results = tuple(results)

    def put_result(self, result: CheckResult) -> None:
        """Replace one result between polls (the kernel-log follower's, the moment it changes)."""
        with self._lock:
            kept = [r for r in self._results if (r.id, r.card) != (result.id, result.card)]
            self._results = (*kept, result)

    def nvml_failed(self, result: CheckResult) -> bool:
        """NVML cannot be read; True when this is news (it answered before).

        ``result`` (the critical ``nvml`` check) stands for every check until NVML
        answers again, so an engine start is refused meanwhile.
        """
        with self._lock:
            news = self._nvml_down is None
            if news:
                self._nvml_down_since_s = time.monotonic()
            self._nvml_down = result
            self._results = (result,)
            self._attempt_s = time.monotonic()
            self._last_error = result.message
            return news

    def nvml_answered(self) -> float | None:
        """NVML answered; how long it had been down (None when it was not down)."""
        with self._lock:
            if self._nvml_down is None:
                return None
            self._nvml_down = None
            return time.monotonic() - self._nvml_down_since_s

    def poll_failed(self, error: str) -> None:
        """Record that a poll attempt failed (the next one still runs)."""
        with self._lock:
            self._last_error = error
            self._attempt_s = time.monotonic()

    def last_attempt_age_s(self) -> float | None:
        """Seconds since the last poll attempt ended (success or failure)."""
        with self._lock:
            return None if self._attempt_s is None else time.monotonic() - self._attempt_s

    def add_xid_if_new(self, xid: ClassifiedXid) -> bool:
        """Add an Xid of this boot unless it is known (``xid_key``); True when it was new.

        How the Xid path decides before it stores: memory says what is new, so a store
        that cannot write neither delays nor repeats the decision.
        """
        key = xid_key(xid.event)
        with self._lock:
            if key in self._xid_keys:
                return False
            self._xid_keys.add(key)
            self._xids.append(xid)
            return True

    def xids(self) -> tuple[ClassifiedXid, ...]:
        """This boot's Xids so far."""
        with self._lock:
            return tuple(self._xids)

    def new_boot(self, boot_id: str, xids: Sequence[ClassifiedXid] = ()) -> None:
        """Start counting for another boot (a reboot was detected)."""
        with self._lock:
            self._boot_id = boot_id
            self._xids = list(xids)
            self._xid_keys = {xid_key(xid.event) for xid in xids}

    def _stale_reason(self, age_s: float | None) -> str | None:
        """Why the last poll is too old to call the rig OK (None while it is fresh)."""
        if age_s is None or age_s <= self._stale_after_s:
            return None
        why = f"; the last poll attempt failed: {self._last_error}" if self._last_error else ""
        return (
            f"no fresh reading for {age_s:.0f} s (a reading is stale after "
            f"{self._stale_after_s:g} s): the poller is stuck or failing{why}"
        )

    def view(self) -> MonitorView:
        """A consistent copy for readers; a picture older than ``stale_after_s`` says so."""
        with self._lock:
            age_s = None if self._last_poll_s is None else time.monotonic() - self._last_poll_s
            return MonitorView(
                samples=tuple(self._samples),
                results=self._results,
                xids=tuple(self._xids),
                boot_id=self._boot_id,
                polls=self._polls,
                last_poll_monotonic_s=self._last_poll_s,
                last_poll_error=self._last_error,
                nvml_down=self._nvml_down,
                last_poll_age_s=age_s,
                stale_reason=None if self._nvml_down else self._stale_reason(age_s),
                verdict=self._verdict,
            )

    def card_index_of(self, pci_bus_id: str | None) -> int | None:
        """The index of the card at ``pci_bus_id`` in the latest poll (None: unknown there)."""
        latest = self.view().latest
        if latest is None or pci_bus_id is None:
            return None
        return next((c.index for c in latest.cards if c.pci_bus_id == pci_bus_id), None)
