"""Alert state in SQL: fire, fold, resolve, repeat, and queue the outbox in one transaction.

Rules (``daemon.alerts.rules``) turn events into ``AlertSignal``s; this module applies
them. Everything a signal changes (the alert row, the notifications queued for each sink,
the event cursor the signals came from) commits together, so a daemon killed at any
point neither loses an alert nor queues one twice: the outbox is written before anything
is sent, and the cursor only moves with the alerts derived from the events behind it.

Times here are wall-clock (``datetime``): repeats and grouping windows must survive a
restart, which a monotonic clock does not.

One alert row per incident: while a fingerprint is firing, more firings fold into it
(``count`` goes up, nothing is sent) unless they raise its severity or change its advice
(a warm reboot that became a cold power cycle is news). An alert whose cause fires
(``AlertPolicy.inhibits``, ``daemon.store.alert_inhibit``) is stored but folded into the
cause's notifications; it is sent on its own only if it outlives its cause. A resolve waits
``group_window_s`` (a flapping check that fires again within it stays one incident);
a first firing is queued at once, never held by the window. Per-card alerts that fire
(or resolve) together in one pass share one notification per sink
(``daemon.store.alert_batch``): a board-level fault is one message naming the cards.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from daemon.store import keyvalue
from daemon.store.alert_batch import NotificationBatch, sinks_told
from daemon.store.alert_inhibit import Inhibits, cause_of, released
from daemon.store.db import Database, check_list_limit, require_aware
from daemon.store.events import EventRow
from daemon.store.models import Alert, AlertNotification, Event, StoredRow
from hwcheck.model import Severity

ALERT_CURSOR = "alert_event_cursor"
DAEMON_MARKER = "daemon_running"
FIRING, RESOLVED = "firing", "resolved"


@dataclass(frozen=True, slots=True)
class AlertSignal:
    """A rule's conclusion: ``fingerprint`` fires (with what to say) or resolves.

    ``prefix``: a resolve that applies to every open fingerprint starting with it (a
    reboot resolves every Xid alert of the boot). ``one_shot``: news with no later
    resolution (a daemon that stopped uncleanly, a test alert): stored resolved at once.
    ``amend``: no firing, no notification: the open alerts it matches (``prefix`` too) of
    the same severity take its advice (the latched Xid's advice follows the latch).
    """

    fingerprint: str
    fire: bool
    rule: str = ""
    severity: Severity = Severity.WARNING
    summary: str = ""
    advice: str = ""
    labels: dict[str, Any] = field(default_factory=dict)
    one_shot: bool = False
    prefix: bool = False
    amend: bool = False


@dataclass(frozen=True, slots=True)
class SinkRoute:
    """Which alerts one sink gets: ``min_severity`` and up.

    ``repeat_all``: repeats of every severity, not only critical (Alertmanager's API
    forgets an alert that is not re-posted).
    """

    name: str
    min_severity: Severity = Severity.WARNING
    repeat_all: bool = False

    def wants(self, severity: Severity) -> bool:
        """Whether an alert of ``severity`` goes to this sink."""
        return severity.rank >= self.min_severity.rank and (
            severity is not Severity.OK or self.min_severity is Severity.OK
        )


@dataclass(frozen=True, slots=True)
class AlertPolicy:
    """Timing of folding and repeats (``[alerts]``), and which alerts fold into which.

    ``inhibits``: cause alertname -> the alertnames it explains (``daemon.alerts.inhibit``).
    """

    group_window_s: float = 60.0
    repeat_interval_s: float = 4 * 3600.0
    inhibits: Inhibits = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AlertRow(StoredRow):
    """One stored alert."""

    id: int
    fingerprint: str
    rule: str
    severity: Severity
    status: str
    summary: str
    advice: str
    labels: dict[str, Any]
    count: int
    one_shot: bool
    started_at: datetime
    last_seen_at: datetime
    notified_at: datetime | None
    resolve_due_at: datetime | None
    resolved_at: datetime | None


@dataclass(frozen=True, slots=True)
class NotificationRow(StoredRow):
    """One outbox entry: what to tell one sink about one alert, and how delivery went."""

    id: int
    uid: str
    alert_id: int
    sink: str
    status: str
    repeat: bool
    payload: dict[str, Any]
    created_at: datetime
    attempts: int
    last_error: str | None
    last_try_at: datetime | None
    delivered_at: datetime | None
    gave_up_at: datetime | None

    @property
    def state(self) -> str:
        """``delivered``, ``gave_up`` (too old), ``retrying`` (tried, failed) or ``pending``."""
        if self.delivered_at is not None:
            return "delivered"
        if self.gave_up_at is not None:
            return "gave_up"
        return "retrying" if self.attempts else "pending"


def _open_alerts(session: Session, fingerprint: str, prefix: bool) -> list[Alert]:
    match = (
        Alert.fingerprint.startswith(fingerprint, autoescape=True)
        if prefix
        else Alert.fingerprint == fingerprint
    )
    stmt = select(Alert).where(match, Alert.status == FIRING).order_by(Alert.id)
    return list(session.execute(stmt).scalars())


def _resolve(session: Session, alert: Alert, now: datetime, batch: NotificationBatch) -> int:
    alert.status = RESOLVED
    alert.resolved_at = now
    alert.resolve_due_at = None
    session.flush()
    return batch.queue(alert, sinks_told(session, alert.id), RESOLVED, False)


def _fire(
    session: Session,
    signal: AlertSignal,
    routes: Sequence[SinkRoute],
    now: datetime,
    batch: NotificationBatch,
) -> int:
    """A firing: a new alert (queued at once), or folded into the open one."""
    wanted = [route.name for route in routes if route.wants(signal.severity)]
    current = (
        None
        if signal.one_shot
        else next(iter(_open_alerts(session, signal.fingerprint, False)), None)
    )
    if current is None:
        cause = None if signal.one_shot else cause_of(session, signal.labels, batch.inhibits)
        alert = Alert(
            fingerprint=signal.fingerprint,
            rule=signal.rule,
            severity=signal.severity,
            status=RESOLVED if signal.one_shot else FIRING,
            summary=signal.summary,
            advice=signal.advice,
            labels=dict(signal.labels),
            count=1,
            one_shot=signal.one_shot,
            started_at=now,
            last_seen_at=now,
            notified_at=None if cause is not None else now,
            resolved_at=now if signal.one_shot else None,
        )
        session.add(alert)
        session.flush()
        if cause is not None:  # a symptom of a firing cause: told with it, not alone
            batch.fold(cause, alert)
            return 0
        return batch.queue(alert, wanted, FIRING, False)
    current.count += 1
    current.last_seen_at = now
    current.resolve_due_at = None  # flapping back within the window: still one incident
    worse = signal.severity.rank > current.severity.rank
    new_advice = (
        signal.severity.rank >= current.severity.rank
        and bool(signal.advice)
        and signal.advice != current.advice
    )
    if not worse and not new_advice:
        return 0  # a duplicate: folded
    current.severity = max(signal.severity, current.severity, key=lambda s: s.rank)
    current.summary, current.advice = signal.summary, signal.advice  # worse, or new advice:
    current.labels = dict(signal.labels)  # that is news
    session.flush()
    if current.notified_at is None and cause_of(session, current.labels, batch.inhibits):
        return 0  # still a symptom of a firing cause
    current.notified_at = now
    return batch.queue(current, wanted, FIRING, False)


def _amend(session: Session, signal: AlertSignal) -> int:
    """Open alerts of the signal's severity take its advice, quietly (nothing is queued)."""
    for alert in _open_alerts(session, signal.fingerprint, signal.prefix):
        if alert.severity is signal.severity and signal.advice:
            alert.advice = signal.advice
    return 0


def _apply(
    session: Session,
    signal: AlertSignal,
    routes: Sequence[SinkRoute],
    policy: AlertPolicy,
    batch: NotificationBatch,
) -> int:
    now = batch.now
    if signal.amend:
        return _amend(session, signal)
    if signal.fire:
        return _fire(session, signal, routes, now, batch)
    queued = 0
    for alert in _open_alerts(session, signal.fingerprint, signal.prefix):
        if policy.group_window_s <= 0:
            queued += _resolve(session, alert, now, batch)
        elif alert.resolve_due_at is None:
            alert.resolve_due_at = now + timedelta(seconds=policy.group_window_s)
    return queued


def _due(
    session: Session, routes: Sequence[SinkRoute], policy: AlertPolicy, batch: NotificationBatch
) -> int:
    """Resolves whose window ended; repeats of alerts still firing after the interval."""
    now = batch.now
    queued = 0
    repeat_before = now - timedelta(seconds=policy.repeat_interval_s)
    stmt = select(Alert).where(
        Alert.status == FIRING,
        or_(Alert.resolve_due_at <= now, Alert.notified_at <= repeat_before),
    )
    for alert in session.execute(stmt).scalars():
        if alert.resolve_due_at is not None and alert.resolve_due_at <= now:
            queued += _resolve(session, alert, now, batch)
            continue
        critical = alert.severity is Severity.CRITICAL
        sinks = [r.name for r in routes if r.wants(alert.severity) and (critical or r.repeat_all)]
        alert.notified_at = now
        queued += batch.queue(alert, sinks, FIRING, True)
    return queued


def _release(session: Session, routes: Sequence[SinkRoute], batch: NotificationBatch) -> int:
    """Folded symptoms that outlived their cause are sent now, as news of their own."""
    if not batch.inhibits:
        return 0
    queued = 0
    for alert in released(session, batch.inhibits):
        alert.notified_at = batch.now
        wanted = [route.name for route in routes if route.wants(alert.severity)]
        queued += batch.queue(alert, wanted, FIRING, False)
    return queued


class AlertQueries(Database):
    """``Store`` methods that derive and keep alerts."""

    def alert_cursor(self) -> int | None:
        """The id of the last event the alert rules have seen (``None``: never ran)."""
        with self.read() as session:
            value = keyvalue.get_value(session, ALERT_CURSOR)
        return None if value is None else int(value)

    def latest_event_id(self) -> int:
        """The newest event's id (0 when there is none)."""
        with self.read() as session:
            return int(session.execute(select(func.max(Event.id))).scalar() or 0)

    def events_after(self, event_id: int, limit: int = 500) -> list[EventRow]:
        """Events with an id above ``event_id``, oldest first (what the rules read next)."""
        check_list_limit(limit)
        stmt = select(Event).where(Event.id > event_id).order_by(Event.id).limit(limit)
        with self.read() as session:
            return [EventRow.from_model(row) for row in session.execute(stmt).scalars()]

    def next_alert_due_at(self, policy: AlertPolicy) -> datetime | None:
        """When the next pending resolve or repeat falls due (``None``: nothing firing)."""
        repeat = timedelta(seconds=policy.repeat_interval_s)
        with self.read() as session:
            resolve = session.execute(
                select(func.min(Alert.resolve_due_at)).where(Alert.status == FIRING)
            ).scalar()
            notified = session.execute(
                select(func.min(Alert.notified_at)).where(Alert.status == FIRING)
            ).scalar()
        candidates = [t for t in (resolve, None if notified is None else notified + repeat) if t]
        return min(candidates) if candidates else None

    def apply_alert_signals(
        self,
        signals: Sequence[AlertSignal],
        routes: Sequence[SinkRoute],
        policy: AlertPolicy,
        *,
        cursor: int | None = None,
        now: datetime | None = None,
    ) -> int:
        """Apply ``signals`` and what fell due, move the cursor: one transaction.

        Returns how many notifications were queued (the senders' cue to wake up).
        """
        ts = require_aware(now or datetime.now(UTC), "alert time")
        with self.write() as session:
            keyvalue.lock_key(session, ALERT_CURSOR)
            batch = NotificationBatch(session, ts, policy.inhibits)
            queued = sum(_apply(session, s, routes, policy, batch) for s in signals)
            session.flush()
            queued += _due(session, routes, policy, batch)
            queued += _release(session, routes, batch)
            if cursor is not None:
                keyvalue.set_value(session, ALERT_CURSOR, cursor, ts)
        return queued

    def queue_test_alert(
        self, sinks: Sequence[str], summary: str, now: datetime | None = None
    ) -> tuple[AlertRow, list[NotificationRow]]:
        """A one-shot ``info`` alert queued for ``sinks`` whatever their ``min_severity``."""
        ts = require_aware(now or datetime.now(UTC), "alert time")
        signal = AlertSignal(
            fingerprint=f"test:{uuid.uuid4().hex[:12]}",
            fire=True,
            rule="test",
            severity=Severity.INFO,
            summary=summary,
            advice="Nothing to do: this checks that alerts reach you.",
            labels={"test": "true"},
            one_shot=True,
        )
        routes = [SinkRoute(name, Severity.OK) for name in sinks]
        with self.write() as session:
            _fire(session, signal, routes, ts, NotificationBatch(session, ts))
            alert = session.execute(
                select(Alert).where(Alert.fingerprint == signal.fingerprint)
            ).scalar_one()
            rows = session.execute(
                select(AlertNotification).where(AlertNotification.alert_id == alert.id)
            ).scalars()
            return AlertRow.from_model(alert), [NotificationRow.from_model(r) for r in rows]

    def swap_daemon_marker(self, marker: dict[str, Any] | None) -> dict[str, Any] | None:
        """Set (or, with ``None``, clear) the "fleetd is running" marker; the previous one.

        Set at start and cleared by a clean stop: a marker found at start means the last
        fleetd died without stopping (killed, crashed, power lost).
        """
        with self.write() as session:
            keyvalue.lock_key(session, DAEMON_MARKER)
            previous = keyvalue.get_value(session, DAEMON_MARKER)
            if marker is None:
                keyvalue.delete_value(session, DAEMON_MARKER)
            else:
                keyvalue.set_value(session, DAEMON_MARKER, marker)
        return None if previous is None else dict(previous)
