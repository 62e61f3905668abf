"""Alerting as fleetd runs it: the engine, one sender per sink, and what the API asks.

``start()`` checks the "fleetd is running" marker (left behind, it means the previous
run never stopped cleanly: an alert), then starts the engine and the senders;
``stop()`` lets the engine derive what was recorded before the stop, gives senders a
moment to finish the request in flight, and clears the marker. Undelivered notifications
simply stay in the outbox for the next start. Implements ``web.routes.alerts.AlertControl``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from daemon.alerts.engine import AlertEngine
from daemon.alerts.formats import RenderContext
from daemon.alerts.inhibit import INHIBITS
from daemon.alerts.rules import unclean_stop_signal
from daemon.alerts.sender import DeliveryTiming, SinkSender
from daemon.alerts.sinks import Sink, build_sinks, display_url
from daemon.config import AlertSettings
from daemon.store import Latch, Store
from daemon.store.alert_batch import GROUP_REACH
from daemon.store.alerts import AlertPolicy, AlertRow, NotificationRow
from hwcheck.threads import CrashReport
from serving.errors import Conflict, NotFound

SENDER_STOP_S = 2.0
ENGINE_STOP_S = 5.0
TEST_SUMMARY = "Test alert from cmpfleet: if you read this, alerts reach you."


def delivery_dict(note: NotificationRow) -> dict[str, Any]:
    """One notification as the API and ``fleetctl alerts --json`` show it."""
    return {
        "id": note.uid,
        "sink": note.sink,
        "status": note.status,
        "repeat": note.repeat,
        "state": note.state,
        "attempts": note.attempts,
        "last_error": note.last_error,
        "created_at": note.created_at.isoformat(),
        "last_try_at": None if note.last_try_at is None else note.last_try_at.isoformat(),
        "delivered_at": None if note.delivered_at is None else note.delivered_at.isoformat(),
    }


def alert_dict(alert: AlertRow, notes: list[NotificationRow]) -> dict[str, Any]:
    """One alert with its deliveries: its own, or its board-level group's.

    A card's alert sent in a group (``daemon.store.alert_batch``) has no notification of
    its own: its deliveries are the group's, and ``sent_with`` names the alert leading it.
    """
    document = alert.to_dict()
    own = [n for n in notes if n.alert_id == alert.id]
    grouped = [
        n
        for n in notes
        if n.alert_id != alert.id
        and any(m.get("alert_id") == alert.id for m in n.payload.get("members") or [])
    ]
    if not own and grouped:
        document["sent_with"] = grouped[0].alert_id
    document["deliveries"] = [delivery_dict(n) for n in own or grouped]
    return document


class AlertService:
    """The alerting part of one fleetd."""

    def __init__(
        self,
        settings: AlertSettings,
        store: Store,
        rig: str,
        external_url: str,
        latch: Callable[[], Latch | None] | None = None,
        on_crash: CrashReport | None = None,
    ) -> None:
        """``latch``: the latch in force, from memory (else the store's).

        ``on_crash``: told if the engine's or a sender's thread dies.
        """
        self._store = store
        self.sinks: list[Sink] = build_sinks(settings)
        policy = AlertPolicy(settings.group_window_s, settings.repeat_interval_s, INHIBITS)
        context_hold_s = 2 * settings.repeat_interval_s
        timing = DeliveryTiming(settings.retry_min_s, settings.retry_max_s, settings.max_age_s)
        self._senders = {
            sink.name: SinkSender(
                sink,
                store,
                RenderContext(sink.name, rig, external_url, context_hold_s),
                timing,
                on_crash,
            )
            for sink in self.sinks
        }
        self.engine = AlertEngine(
            store, [s.route for s in self.sinks], policy, self.wake_senders, latch, on_crash
        )

    def wake_senders(self) -> None:
        """Notifications were queued: every sender looks at its outbox now."""
        for sender in self._senders.values():
            sender.wake()

    def start(self) -> None:
        """Note an unclean previous stop, then start deriving and delivering."""
        now = datetime.now(UTC)
        previous = self._store.swap_daemon_marker({"pid": os.getpid(), "since": now.isoformat()})
        if previous is not None:
            self.engine.add(unclean_stop_signal(previous, now))
        self.engine.start()
        for sender in self._senders.values():
            sender.start()

    def stop(self) -> None:
        """Derive what is recorded, stop the senders, clear the running marker."""
        self.engine.stop(ENGINE_STOP_S)
        for sender in self._senders.values():
            sender.stop(SENDER_STOP_S)
        self._store.swap_daemon_marker(None)

    # -- the API ------------------------------------------------------------------------
    def sinks_document(self) -> list[dict[str, Any]]:
        """The configured sinks (URLs without path or credentials) and their queues."""
        pending = self._store.outbox_pending()
        return [
            {
                "name": sink.name,
                "format": sink.format,
                "url": display_url(sink.url),
                "min_severity": sink.min_severity.value,
                "signed": sink.secret is not None,
                "pending": pending.get(sink.name, 0),
            }
            for sink in self.sinks
        ]

    def list_alerts(self, limit: int, status: str | None) -> dict[str, Any]:
        """Recent alerts newest first, each with its deliveries, and the sinks."""
        alerts = self._store.list_alerts(limit, status)
        # A group's notification belongs to its first card's alert, an older id nearby.
        ids = {a.id for a in alerts}
        ids |= {i for a in alerts for i in range(max(1, a.id - GROUP_REACH), a.id)}
        notes = self._store.notifications_of(sorted(ids))
        return {"sinks": self.sinks_document(), "alerts": [alert_dict(a, notes) for a in alerts]}

    def get_alert(self, alert_id: int) -> dict[str, Any]:
        """One alert with its deliveries; ``NotFound`` when there is none."""
        alert = self._store.get_alert(alert_id)
        if alert is None:
            raise NotFound(f"no alert {alert_id}")
        near = list(range(max(1, alert_id - GROUP_REACH), alert_id + 1))
        notes = self._store.notifications_of(near)
        document = alert_dict(alert, notes)
        by_uid = {note.uid: note for note in notes}
        for delivery in document["deliveries"]:
            note = by_uid.get(delivery["id"])
            if note is not None and note.state == "pending":
                self._explain_wait(delivery, note)
        return document

    def _explain_wait(self, delivery: dict[str, Any], note: NotificationRow) -> None:
        """A pending delivery queued behind a sink that is failing says so (``blocked_by``)."""
        count, error = self._store.backlog_before(note.sink, note.id)
        if count and error:
            delivery["blocked_by"] = {"queued_before": count, "last_error": error}

    def send_test(self, sink: str | None) -> dict[str, Any]:
        """Queue a test alert for ``sink`` (default: every sink), whatever its min_severity."""
        names = [s.name for s in self.sinks]
        if not names:
            raise Conflict(
                "no webhooks configured: add [[alerts.webhooks]] to fleet.toml", "no_webhooks"
            )
        if sink is not None and sink not in names:
            raise NotFound(f"no sink named {sink!r}: configured are {', '.join(names)}")
        alert, notes = self._store.queue_test_alert(names if sink is None else [sink], TEST_SUMMARY)
        self.wake_senders()
        return alert_dict(alert, notes)
