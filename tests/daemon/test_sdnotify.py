"""The notify protocol against a real datagram peer (no systemd needed)."""

from __future__ import annotations

import socket
from pathlib import Path

from daemon.sdnotify import Notifier
from tests.support.fleetd import NotifyPeer


def test_messages_reach_a_real_peer(tmp_path: Path) -> None:
    peer = NotifyPeer(tmp_path)
    try:
        notifier = Notifier({"NOTIFY_SOCKET": str(peer.path), "WATCHDOG_USEC": "4000000"})
        assert notifier.enabled
        assert notifier.watchdog_interval_s == 2.0
        assert notifier.ready("4 cards ok")
        assert peer.receive(2) == "READY=1\nSTATUS=4 cards ok"
        assert notifier.watchdog()
        assert peer.receive(2) == "WATCHDOG=1"
        assert notifier.status("line one\nline two")
        assert peer.receive(2) == "STATUS=line one"
        assert notifier.stopping()
        assert peer.receive(2) == "STOPPING=1\nSTATUS=shutting down"
        notifier.close()
    finally:
        peer.close()


def test_abstract_namespace_address(tmp_path: Path) -> None:
    name = f"cmpfleet-test-{tmp_path.name}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(b"\0" + name.encode())
    try:
        notifier = Notifier({"NOTIFY_SOCKET": "@" + name})
        assert notifier.send("READY=1")
        sock.settimeout(2)
        assert sock.recv(100) == b"READY=1"
        notifier.close()
    finally:
        sock.close()


def test_a_peer_that_never_reads_does_not_block(tmp_path: Path) -> None:
    peer = NotifyPeer(tmp_path)  # bound, never read: its queue fills up
    try:
        notifier = Notifier({"NOTIFY_SOCKET": str(peer.path)})
        results = [notifier.send("STATUS=" + "x" * 1000) for _ in range(5000)]
        assert results[0] is True
        assert results[-1] is False, "the queue never filled, so the test proved nothing"
        notifier.close()
    finally:
        peer.close()


def test_missing_socket_and_watchdog_of_another_pid() -> None:
    assert not Notifier({}).enabled
    assert Notifier({}).send("READY=1") is False
    other = Notifier(
        {"NOTIFY_SOCKET": "/nonexistent/sock", "WATCHDOG_USEC": "100", "WATCHDOG_PID": "1"}
    )
    assert other.watchdog_interval_s is None
    assert other.send("READY=1") is False
    other.close()
