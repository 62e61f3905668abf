"""Counts non-fatal engine log signatures per hour from the captured engine log.

A thread follows the engine's ``LogCapture`` (new lines only: a restarted fleetd neither
re-counts old lines nor loses the hour's count, which it reloads from the store) and
writes the current hour's counts at most every ``flush_s`` and at every hour change.
A signature of severity ``warning`` or ``critical`` (``[[serving.log_signatures]]``) is
also a ``serving`` event of that severity the first time it is seen in an hour; the event
names the signature, never the line (engine output can hold users' prompts).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from daemon.store import Store, StoreError
from hwcheck.model import EventKind, Severity
from hwcheck.threads import CrashReport, ServiceThread, Wake
from serving.canary.signatures import INFO, SignatureTable, hour_of
from serving.runtime.classify import LAUNCH_MARKER_PREFIX
from serving.runtime.logcapture import LogCapture, LogSubscription

log = logging.getLogger("fleetd.canary")

FLUSH_S = 10.0
WAKE_S = 0.5
WINDOW_H = 24


class LogSignatureCounter:
    """Follows one log capture and keeps per-hour counts of each signature."""

    def __init__(
        self,
        table: SignatureTable,
        store: Store,
        capture: LogCapture,
        flush_s: float = FLUSH_S,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_crash: CrashReport | None = None,
    ) -> None:
        self._table = table
        self._store = store
        self._capture = capture
        self._flush_s = flush_s
        self._now = now
        self._lock = threading.Lock()
        self._hour = hour_of(now())
        self._counts: Counter[str] = Counter()
        self._totals: Counter[str] = Counter()  # since fleetd started (a Prometheus counter)
        self._dirty = False
        self._announced: set[str] = set()  # this hour's sightings already recorded as events
        self._thread = ServiceThread("log-signatures", self._follow, on_crash=on_crash, log=log)
        # Subscribed when built, not when started: fleetd builds this before it opens (adopts)
        # or starts the engine and starts it after. A line the engine printed in between was
        # lost: on a loaded machine an engine could be ready and print its signature first.
        # Lines queue here until ``start`` (bounded, as every follower is).
        self._subscription: LogSubscription = capture.subscribe()

    def start(self) -> None:
        """Reload this hour's counts and count each line since this counter was built."""
        try:
            for hour, name, count in self._store.log_signature_counts(self._hour):
                if hour == self._hour:
                    self._counts[name] = count
        except StoreError as exc:
            log.warning("log-signature counts not read: %s", exc)
        self._thread.start()

    def stop(self) -> None:
        """Stop following and write the last counts."""
        self._thread.stop(5.0)
        self._capture.unsubscribe(self._subscription)  # also when it was never started
        self._flush()

    def _follow(self, wake: Wake) -> None:
        """Count each new line (a quiet spell waits ``WAKE_S`` at a time); flush on schedule."""
        last_flush_s = time.monotonic()
        with self._subscription as subscription:
            while not wake.stopping:
                line = subscription.get(timeout_s=WAKE_S)
                if line is not None:
                    self.add_line(line)
                if time.monotonic() - last_flush_s >= self._flush_s:
                    self._flush()
                    last_flush_s = time.monotonic()

    def add_line(self, line: str) -> None:
        """Count one engine log line in the current hour (fleetd's launch markers are not)."""
        if line.startswith(LAUNCH_MARKER_PREFIX):
            return  # the argv it shows may quote anything, signature text included
        found = self._table.match(line)
        if not found:
            return
        self._roll()
        with self._lock:
            self._counts.update(found)
            self._totals.update(found)
            self._dirty = True
            news = [
                n for n in found if self._table.severity(n) != INFO and n not in self._announced
            ]
            self._announced.update(news)
        for name in news:
            self._announce(name)

    def _announce(self, name: str) -> None:
        """A ``serving`` event for a warning/critical signature's first sighting this hour."""
        severity = Severity(self._table.severity(name))
        message = (
            f"engine log signature {name!r} seen ({severity.value}); "
            "fleetctl logs shows the engine's lines"
        )
        try:
            self._store.record_event(
                EventKind.SERVING,
                severity,
                message,
                details={"signature": name, "severity": severity.value},
            )
        except StoreError as exc:
            log.error("log-signature event not stored: %s", exc)

    def _roll(self) -> None:
        """At an hour change, write the finished hour and start a new one."""
        hour = hour_of(self._now())
        if hour == self._hour:
            return
        self._flush()
        with self._lock:
            self._hour, self._counts, self._dirty = hour, Counter(), False
            self._announced = set()

    def _flush(self) -> None:
        with self._lock:
            if not self._dirty:
                return
            hour, counts, self._dirty = self._hour, dict(self._counts), False
        try:
            self._store.set_log_signature_counts(hour, counts)
        except StoreError as exc:
            log.error("log-signature counts not stored: %s", exc)
            with self._lock:
                self._dirty = True

    def totals(self) -> dict[str, int]:
        """Every signature's count since fleetd started (memory only)."""
        with self._lock:
            return {name: self._totals.get(name, 0) for name in self._table.names}

    def entries(self) -> list[dict[str, Any]]:
        """Each signature: this hour's count, the last 24 hours' and when it was last counted."""
        self._roll()
        now_hour = hour_of(self._now())
        since = now_hour - timedelta(hours=WINDOW_H - 1)
        window: Counter[str] = Counter()
        last_hour: dict[str, datetime] = {}
        try:
            stored = self._store.log_signature_counts(since)
        except StoreError:
            stored = []
        for hour, name, count in stored:
            if hour != now_hour:
                window[name] += count
                if count:
                    last_hour[name] = max(hour, last_hour.get(name, hour))
        with self._lock:
            current = Counter(self._counts)
        entries = []
        for name in self._table.names:
            seen = now_hour if current.get(name) else last_hour.get(name)
            entries.append(
                {
                    "name": name,
                    "severity": self._table.severity(name),
                    "this_hour": current.get(name, 0),
                    "last_24h": window.get(name, 0) + current.get(name, 0),
                    "last_seen_hour": None if seen is None else seen.isoformat(),
                }
            )
        return entries
