"""One sink's sender against a real receiver on loopback, over a real SQLite outbox."""

from __future__ import annotations

import logging
import re
import socket
import ssl
import subprocess
import threading
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

ROUTES = [SinkRoute("all", Severity.INFO)]
FAST = DeliveryTiming(retry_min_s=0.05, retry_max_s=0.2, max_age_s=3600)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    yield opened
    opened.close()


def fire(fp: str) -> AlertSignal:
    return AlertSignal(fp, fire=True, rule="t", severity=Severity.WARNING, summary=f"{fp} is bad")


def sender_for(
    store: Store, receiver: WebhookReceiver, timing: DeliveryTiming = FAST
) -> SinkSender:
    sink = Sink("all", receiver.url + "/hook", "json", Severity.INFO, 2.0, secret=b"k")
    return SinkSender(sink, store, RenderContext("all", "rig"), timing)


def test_a_receiver_down_for_a_while_gets_everything_once_in_order(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="fleetd.alerts")
    receiver = WebhookReceiver()  # not listening yet: connection refused
    policy = AlertPolicy(group_window_s=0)
    for n in range(6):
        store.apply_alert_signals([fire(f"a{n}")], ROUTES, policy)
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
    # one line when it began failing and one when it answered again, never one per try
    lines = [r.getMessage() for r in caplog.records if r.name == "fleetd.alerts"]
    assert len([line for line in lines if "delivery failed" in line]) == 1
    (again,) = [line for line in lines if "delivering again after" in line]
    assert re.search(r"after \d+ s$", again)


def test_a_refusing_receiver_is_retried_with_the_reason_recorded(store: Store) -> None:
    receiver = WebhookReceiver().start()
    receiver.status = 503
    store.apply_alert_signals([fire("x")], ROUTES, AlertPolicy())
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
    store.apply_alert_signals([fire("old")], ROUTES, AlertPolicy(), now=now - timedelta(hours=2))
    store.apply_alert_signals([fire("new")], ROUTES, AlertPolicy(), now=now)
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
    store.apply_alert_signals([fire("tls")], ROUTES, AlertPolicy())
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


class HugeAnswer:
    """A raw HTTP receiver answering 200 with a 50 MB body; counts the bytes it got out."""

    BODY_BYTES = 50 * 1024 * 1024

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.sent = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(65536)
            head, _, body = request.partition(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
            while len(body) < length:
                body += conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % self.BODY_BYTES)
            chunk = b"x" * 65536
            try:
                while self.sent < self.BODY_BYTES:
                    conn.sendall(chunk)
                    self.sent += len(chunk)
            except OSError:
                pass  # the sender closed the connection: what we hoped for
        self.done.set()


def test_a_receiver_answering_a_huge_body_is_read_only_up_to_the_cap(store: Store) -> None:
    receiver = HugeAnswer()
    store.apply_alert_signals([fire("big")], ROUTES, AlertPolicy())
    sink = Sink("all", receiver.url, "json", Severity.INFO, 10.0)
    sender = SinkSender(sink, store, RenderContext("all", "rig"), FAST)
    sender.start()
    try:
        wait_until(lambda: store.outbox_pending() == {}, 20, "delivered on its 200")
        assert receiver.done.wait(20)
    finally:
        sender.stop(5)
        receiver.listener.close()
    # What left the receiver is what the sockets' buffers took after fleetd's 64 KiB.
    assert receiver.sent < receiver.BODY_BYTES // 2, receiver.sent
