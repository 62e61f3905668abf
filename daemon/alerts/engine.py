"""The alert engine: follows the events table and the latch, and applies the rules.

It reads events past its stored cursor (so an event is turned into alerts exactly once,
even across a ``kill -9``: the cursor moves in the same transaction as the alerts), plus
the reboot-required latch in force, read from memory (``daemon.ports.latch``): the latch
alert never waits for the store to catch up with the latch (issue 22). It does not
poll: the store wakes it after each committed write that recorded an event or set the
latch (``Store.add_news_listener``), fleetd when the live latch moves, and it sleeps
until then or until the next resolve or repeat falls due. After a commit that queued notifications it calls ``on_queued``
(the senders' wake-up).

On its very first run the cursor starts at the newest event: history from before
alerting existed is not sent to anyone.

The latch is looked at first in each pass (its alert is the cause the engine's troubles
fold into) and by what it says, not only whether it is set: a latch whose advice changed
(a warm reboot that did not help: a cold power cycle) fires again, and the open latching
Xid alerts take its advice.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from daemon.alerts.inhibit import causes_first
from daemon.alerts.rules import event_signals, latch_signal, latched_xid_advice
from daemon.store import Latch, Store, StoreError
from daemon.store.alerts import AlertPolicy, AlertSignal, SinkRoute
from hwcheck.model import Severity
from hwcheck.threads import CrashReport, ServiceThread, Wake
from hwcheck.verdict import FiringAlert

log = logging.getLogger("fleetd.alerts")

EVENT_BATCH = 500
STORE_RETRY_S = 1.0
FIRING_LIMIT = 500
# Alerts the verdict already carries: the check results themselves.
_IN_THE_VERDICT = frozenset({"check"})


class AlertEngine:
    """Derives alerts on its own thread."""

    def __init__(
        self,
        store: Store,
        routes: list[SinkRoute],
        policy: AlertPolicy,
        on_queued: Callable[[], None],
        latch: Callable[[], Latch | None] | None = None,
        on_crash: CrashReport | None = None,
    ) -> None:
        """``latch`` is the latch in force (default: the store's, for a store-only engine)."""
        self._store = store
        self._latch = latch or store.get_latch
        self._routes = routes
        self._policy = policy
        self._on_queued = on_queued
        self._thread = ServiceThread("alerts-engine", self._run, on_crash=on_crash, log=log)
        # What the latch said at the last pass: None unknown, () cleared, else its words.
        self._latched: tuple[str, str] | tuple[()] | None = None
        self._error: str | None = None
        self._pending: list[AlertSignal] = []
        self._lock = threading.Lock()
        self._firing_listeners: list[Callable[[list[FiringAlert]], None]] = []
        self._firing_stale = True

    def start(self) -> None:
        """Start following (the cursor is set to the newest event on a first run)."""
        self._store.add_news_listener(self.wake)
        self._thread.start()

    def add_firing_listener(self, listener: Callable[[list[FiringAlert]], None]) -> None:
        """Told the alerts firing now after each change.

        Not the checks' own (the verdict's input), not one-shot news, and not one whose
        cause is gone and that only waits out the group window before it resolves.
        """
        self._firing_listeners.append(listener)

    def _publish_firing(self) -> None:
        """The firing alerts to the listeners (the verdict), once after each applied pass."""
        if not self._firing_stale or not self._firing_listeners:
            return
        rows = self._store.list_alerts(FIRING_LIMIT, status="firing")
        firing = [
            FiringAlert(str(row.labels.get("alertname") or row.rule), row.severity, row.summary)
            for row in rows
            if row.rule not in _IN_THE_VERDICT
            and not row.one_shot
            and row.resolve_due_at is None  # its cause is gone: only the group window waits
            and Severity(row.severity).rank > 0
        ]
        self._firing_stale = False
        for listener in self._firing_listeners:
            listener(firing)

    def wake(self) -> None:
        """Look for new events now."""
        self._thread.wake()

    def latch_changed(self, required: bool) -> None:
        """The latch in force was set or cleared: its alert fires or resolves now."""
        self.wake()

    def add(self, signal: AlertSignal) -> None:
        """A signal from outside the events (an unclean stop found at start)."""
        with self._lock:
            self._pending.append(signal)
        self._thread.wake()

    def stop(self, timeout_s: float) -> None:
        """Stop after one last pass (what was recorded before the stop is derived)."""
        self._thread.stop(timeout_s)

    def _run(self, wake: Wake) -> None:
        wait_s: float | None = None
        while True:
            stopping = wake.stopping
            try:
                wait_s = self._seconds_to_due(self.step())
                if self._error is not None:
                    log.warning("alerts: the engine works again after: %s", self._error)
                    self._error = None
            except StoreError as exc:
                wait_s = STORE_RETRY_S
                if str(exc) != self._error:
                    log.error("alerts: cannot derive alerts: %s (retrying)", exc)
                    self._error = str(exc)
            if stopping:
                return
            wake.wait(wait_s)

    @staticmethod
    def _seconds_to_due(due: datetime | None) -> float | None:
        if due is None:
            return None
        return max(0.0, (due - datetime.now(UTC)).total_seconds())

    def step(self, now: datetime | None = None) -> datetime | None:
        """One pass: new events, the latch, what fell due, then what fires to the verdict.

        Returns when the next item falls due.
        """
        due = self._step(now)
        self._publish_firing()
        return due

    def _step(self, now: datetime | None) -> datetime | None:
        ts = now or datetime.now(UTC)
        cursor = self._store.alert_cursor()
        if cursor is None:
            cursor = self._store.latest_event_id()
            self._store.apply_alert_signals([], self._routes, self._policy, cursor=cursor, now=ts)
        with self._lock:
            outside, self._pending = self._pending, []
        signals = list(outside)
        latch = self._latch()
        said = () if latch is None else (latch.reason, latch.advice.value)
        if said != self._latched:  # set, cleared, or its advice changed
            signals.append(latch_signal(latch))
            if latch is not None:
                signals.append(latched_xid_advice(latch))
        events = self._store.events_after(cursor, EVENT_BATCH)
        for event in events:
            signals.extend(event_signals(event, latch))
        due = self._store.next_alert_due_at(self._policy)
        if not signals and not events and (due is None or due > ts):
            return due
        try:
            queued = self._store.apply_alert_signals(
                causes_first(signals, self._policy.inhibits),
                self._routes,
                self._policy,
                cursor=events[-1].id if events else None,
                now=ts,
            )
        except StoreError:
            with self._lock:  # the outside signals are not in any table yet: keep them
                self._pending[:0] = outside
            raise
        self._latched = said
        self._firing_stale = True
        if queued:
            self._on_queued()
        if len(events) == EVENT_BATCH:
            self._thread.wake()  # more to read: no pause
        return self._store.next_alert_due_at(self._policy)
