"""The notify protocol against a real datagram peer (no systemd needed), and what gates it."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from daemon.sdnotify import Notifier
from tests.support.fleetd import Fleetd, NotifyPeer, start_fleetd, stop_all, wait_until


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


def test_watchdog_stops_while_the_kernel_log_follower_stays_down(tmp_path: Path) -> None:
    """A follower down past ``kernel_log_down_watchdog_s`` withholds WATCHDOG=1 (systemd then
    restarts fleetd); back up, the pings resume."""
    config = tmp_path / "fleet.toml"
    config.write_text("[poll]\nkernel_log_down_watchdog_s = 2\n")
    daemon = start_fleetd(
        tmp_path, tmp_path / "state", config=config, env={"WATCHDOG_USEC": "1000000"}
    )
    try:
        assert daemon.peer is not None
        daemon.peer.wait_for("WATCHDOG=1", 5)
        log = daemon.state_dir / "sim-kmsg.log"
        aside = daemon.state_dir / "sim-kmsg.saved"
        log.rename(aside)
        log.mkdir()  # the simulated kernel log can no longer be read: the follower fails
        wait_until(lambda: kernel_log(daemon)["severity"] == "warning", 10, "kernel_log warning")
        assert "a directory, not a regular file" in str(kernel_log(daemon)["message"])
        down_at_s = time.monotonic()
        # Pings may go on for the 2 s the follower is allowed; then none at all.
        last_ping_s = down_at_s
        while time.monotonic() < down_at_s + 8:
            message = daemon.peer.receive(0.2)
            if message is not None and "WATCHDOG=1" in message.splitlines():
                last_ping_s = time.monotonic()
        assert last_ping_s < down_at_s + 4, "WATCHDOG=1 kept coming while the follower was down"
        assert "kernel-log follower has been down" in daemon.log()
        log.rmdir()
        aside.rename(log)
        daemon.peer.wait_for("WATCHDOG=1", 10)
        wait_until(lambda: kernel_log(daemon)["severity"] == "ok", 10, "kernel_log ok again")
    finally:
        stop_all([daemon])


def kernel_log(daemon: Fleetd) -> dict[str, object]:
    (check,) = [c for c in daemon.get("/api/v1/status").json()["checks"] if c["id"] == "kernel_log"]
    return dict(check)
