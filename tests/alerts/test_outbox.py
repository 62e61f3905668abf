"""The alert state and its outbox on a real SQLite file; a sender against a real receiver."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from daemon.alerts.formats import RenderContext
from daemon.alerts.sender import DeliveryTiming, SinkSender
from daemon.alerts.signing import verify
from daemon.alerts.sinks import Sink
from daemon.store import Store
from daemon.store.alerts import AlertPolicy, AlertSignal, SinkRoute
from hwcheck.model import Severity
from tests.support.external import require_program
from tests.support.fleetd import wait_until
from tests.support.webhook import WebhookReceiver

T0 = datetime(2026, 9, 29, 3, 0, tzinfo=UTC)
ROUTES = [SinkRoute("all", Severity.INFO), SinkRoute("crit", Severity.CRITICAL)]
FAST = DeliveryTiming(retry_min_s=0.05, retry_max_s=0.2, max_age_s=3600)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    yield opened
    opened.close()


def fire(fp: str, severity: Severity = Severity.WARNING, **kw: object) -> AlertSignal:
    return AlertSignal(fp, fire=True, rule="t", severity=severity, summary=f"{fp} is bad", **kw)  # type: ignore[arg-type]


def resolve(fp: str) -> AlertSignal:
    return AlertSignal(fp, fire=False)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def queued(store: Store) -> list[tuple[str, str, str, bool]]:
    """(fingerprint, sink, status, repeat) of every notification, oldest first."""
    alerts = {a.id: a.fingerprint for a in store.list_alerts(1000)}
    notes = store.notifications_of(list(alerts))
    return [(alerts[n.alert_id], n.sink, n.status, n.repeat) for n in notes]


def test_duplicates_fold_and_only_a_worse_severity_is_news(store: Store) -> None:
    policy = AlertPolicy(group_window_s=0)
    store.apply_alert_signals([fire("a")], ROUTES, policy, now=at(0))
    store.apply_alert_signals([fire("a"), fire("a")], ROUTES, policy, now=at(1))
    assert queued(store) == [("a", "all", "firing", False)]
    store.apply_alert_signals([fire("a", Severity.CRITICAL)], ROUTES, policy, now=at(2))
    assert queued(store)[1:] == [("a", "all", "firing", False), ("a", "crit", "firing", False)]
    (alert,) = store.list_alerts()
    assert alert.count == 4 and alert.severity is Severity.CRITICAL


def test_a_resolve_waits_the_window_and_flapping_stays_one_alert(store: Store) -> None:
    policy = AlertPolicy(group_window_s=60)
    store.apply_alert_signals([fire("t")], ROUTES, policy, now=at(0))
    store.apply_alert_signals([resolve("t")], ROUTES, policy, now=at(1))
    store.apply_alert_signals([fire("t")], ROUTES, policy, now=at(2))  # back within the window
    store.apply_alert_signals([resolve("t")], ROUTES, policy, now=at(3))
    store.apply_alert_signals([], ROUTES, policy, now=at(62))
    assert queued(store) == [("t", "all", "firing", False)]
    assert store.next_alert_due_at(policy) == at(63)
    store.apply_alert_signals([], ROUTES, policy, now=at(63))
    assert queued(store) == [("t", "all", "firing", False), ("t", "all", "resolved", False)]
    (alert,) = store.list_alerts()
    assert alert.status == "resolved" and alert.count == 2 and alert.resolved_at == at(63)


def test_a_first_firing_is_never_held_by_the_window(store: Store) -> None:
    policy = AlertPolicy(group_window_s=3600)
    assert store.apply_alert_signals([fire("new")], ROUTES, policy, now=at(0)) == 1


def test_critical_alerts_repeat_and_alertmanager_api_hears_every_one(store: Store) -> None:
    routes = [*ROUTES, SinkRoute("am", Severity.WARNING, repeat_all=True)]
    policy = AlertPolicy(group_window_s=0, repeat_interval_s=100)
    store.apply_alert_signals([fire("c", Severity.CRITICAL), fire("w")], routes, policy, now=at(0))
    first = len(queued(store))
    store.apply_alert_signals([], routes, policy, now=at(99))
    assert len(queued(store)) == first
    store.apply_alert_signals([], routes, policy, now=at(100))
    repeats = sorted((fp, sink) for fp, sink, _, rep in queued(store) if rep)
    assert repeats == [("c", "all"), ("c", "am"), ("c", "crit"), ("w", "am")]


def test_resolves_go_only_to_the_sinks_told_it_fired(store: Store) -> None:
    policy = AlertPolicy(group_window_s=0)
    store.apply_alert_signals([fire("w")], ROUTES, policy, now=at(0))
    store.apply_alert_signals([resolve("w")], ROUTES, policy, now=at(1))
    assert queued(store) == [("w", "all", "firing", False), ("w", "all", "resolved", False)]


def test_prefix_resolves_and_one_shots(store: Store) -> None:
    policy = AlertPolicy(group_window_s=0)
    signals = [fire("xid:hardware:1"), fire("xid:application:2"), fire("other")]
    store.apply_alert_signals(signals, ROUTES, policy, now=at(0))
    store.apply_alert_signals([AlertSignal("xid:", False, prefix=True)], ROUTES, policy, now=at(1))
    assert {a.fingerprint for a in store.list_alerts(status="firing")} == {"other"}
    store.apply_alert_signals([fire("news", one_shot=True)], ROUTES, policy, now=at(2))
    store.apply_alert_signals([fire("news", one_shot=True)], ROUTES, policy, now=at(3))
    news = [a for a in store.list_alerts() if a.fingerprint == "news"]
    assert len(news) == 2 and all(a.status == "resolved" for a in news)


def test_the_cursor_moves_with_the_alerts(store: Store) -> None:
    assert store.alert_cursor() is None
    store.apply_alert_signals([fire("a")], ROUTES, AlertPolicy(), cursor=42, now=at(0))
    assert store.alert_cursor() == 42


def sender_for(
    store: Store, receiver: WebhookReceiver, timing: DeliveryTiming = FAST
) -> SinkSender:
    sink = Sink("all", receiver.url + "/hook", "json", Severity.INFO, 2.0, secret=b"k")
    return SinkSender(sink, store, RenderContext("all", "rig"), timing)


def test_a_receiver_down_for_a_while_gets_everything_once_in_order(store: Store) -> None:
    receiver = WebhookReceiver()  # not listening yet: connection refused
    policy = AlertPolicy(group_window_s=0)
    for n in range(6):
        store.apply_alert_signals([fire(f"a{n}")], ROUTES[:1], policy)
    expected = [n.uid for n in store.notifications_of([a.id for a in store.list_alerts()])]
    sender = sender_for(store, receiver)
    sender.start()
    try:
        wait_until(
            lambda: (n := store.next_notification("all")) is not None and n.attempts >= 3,
            10,
            "three failed tries",
        )
        head = store.next_notification("all")
        assert head is not None and head.uid == expected[0]
        assert head.last_error is not None and "ConnectError" in head.last_error
        receiver.start()
        got = receiver.wait_for(lambda rs: len({r.json()["id"] for r in rs}) == 6, 10, "all six")
    finally:
        sender.stop(5)
        receiver.stop()
    ids = [r.headers["X-Cmpfleet-Id"] for r in got]
    assert [r.json()["id"] for r in got] == ids
    assert list(dict.fromkeys(ids)) == expected  # in order, and each once after de-duplication
    assert len(ids) == len(expected)  # nothing was even sent twice
    assert all(verify(b"k", r.body, r.headers["X-Cmpfleet-Signature"]) for r in got)
    assert store.outbox_pending() == {}


def test_a_refusing_receiver_is_retried_with_the_reason_recorded(store: Store) -> None:
    receiver = WebhookReceiver().start()
    receiver.status = 503
    store.apply_alert_signals([fire("x")], ROUTES[:1], AlertPolicy())
    sender = sender_for(store, receiver)
    sender.start()
    try:
        wait_until(
            lambda: (n := store.next_notification("all")) is not None and n.attempts >= 2,
            10,
            "two refused tries",
        )
        head = store.next_notification("all")
        assert head is not None and head.last_error == "HTTP 503 Service Unavailable"
        receiver.status = 200
        receiver.wait_for(lambda rs: len(rs) == 1, 10, "the retry")
        wait_until(lambda: store.outbox_pending() == {}, 5, "delivered state stored")
    finally:
        sender.stop(5)
        receiver.stop()
    (note,) = store.notifications_of([store.list_alerts()[0].id])
    assert note.state == "delivered" and note.attempts >= 3


def test_too_old_is_given_up_and_the_queue_moves_on(store: Store) -> None:
    receiver = WebhookReceiver().start()
    now = datetime.now(UTC)
    store.apply_alert_signals(
        [fire("old")], ROUTES[:1], AlertPolicy(), now=now - timedelta(hours=2)
    )
    store.apply_alert_signals([fire("new")], ROUTES[:1], AlertPolicy(), now=now)
    sender = sender_for(store, receiver, DeliveryTiming(0.05, 0.2, max_age_s=3600))
    sender.start()
    try:
        (got,) = receiver.wait_for(lambda rs: len(rs) == 1, 10, "the fresh one")
    finally:
        sender.stop(5)
        receiver.stop()
    assert got.json()["fingerprint"] == "new"
    states = {a.fingerprint: store.notifications_of([a.id])[0] for a in store.list_alerts()}
    assert states["old"].state == "gave_up" and "max_age_s" in (states["old"].last_error or "")


def test_tls_certificates_are_verified(store: Store, tmp_path: Path) -> None:
    """A receiver with a self-signed certificate is refused, not trusted."""
    openssl = require_program("openssl", "openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    argv = [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    argv += ["-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)]
    subprocess.run(argv, check=True, capture_output=True)
    receiver = WebhookReceiver().start()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    receiver.wrap(context)
    store.apply_alert_signals([fire("tls")], ROUTES[:1], AlertPolicy())
    sink = Sink("all", f"https://127.0.0.1:{receiver.port}/hook", "json", Severity.INFO, 2.0)
    sender = SinkSender(sink, store, RenderContext("all", "rig"), FAST)
    sender.start()
    try:
        wait_until(
            lambda: (n := store.next_notification("all")) is not None and n.attempts >= 1,
            10,
            "a refused TLS handshake",
        )
    finally:
        sender.stop(5)
        receiver.stop()
    head = store.next_notification("all")
    assert head is not None and "CERTIFICATE_VERIFY_FAILED" in (head.last_error or "")
    assert receiver.requests == []
