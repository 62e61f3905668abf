"""The Xid path of a real fleetd: boot log first, one severity rule, a follower that never dies."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=5)

SCENARIOS = Path(__file__).resolve().parents[2] / "hwcheck" / "sim" / "scenarios"
BOOT_XID = (
    "NVRM: Xid (PCI:0000:21:00): 31, pid=13641, name=python3, Ch 00000008, "
    "intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_10 faulted @ 0x7fd7_90743000"
)


@pytest.fixture
def daemons() -> Iterator[list[Fleetd]]:
    started: list[Fleetd] = []
    yield started
    stop_all(started)


def xid_events(daemon: Fleetd) -> list[dict[str, object]]:
    return list(daemon.get("/api/v1/events?kind=xid&limit=1000").json())


def checks_of(daemon: Fleetd, check_id: str) -> list[dict[str, object]]:
    return [c for c in daemon.get("/api/v1/status").json()["checks"] if c["id"] == check_id]


def test_first_start_records_the_boot_logs_xid_and_does_not_autostart(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    healthy = (SCENARIOS / "healthy.toml").read_text()
    assert "boot_log = [" in healthy, "the healthy scenario changed shape"
    scenario = tmp_path / "boot-xid31.toml"
    scenario.write_text(healthy.replace("boot_log = [", f'boot_log = [\n    "{BOOT_XID}",', 1))
    daemon = start_fleetd(tmp_path, tmp_path / "state", simulate=str(scenario))
    daemons.append(daemon)
    # Recorded before READY=1: the first status already counts it.
    events = xid_events(daemon)
    assert [(e["card"], e["xid"], e["severity"]) for e in events] == [(1, 31, "critical")]
    status = daemon.get("/api/v1/status").json()
    assert status["overall"] == "critical"
    assert status["serving"]["state"] not in {"starting", "ready"}
    assert status["recovery"]["reboot_required"] is True
    assert status["recovery"]["reason"] == "Xid 31 (MMU page fault) on card 1"
    log = daemon.log()
    assert (
        "not autostarting the engine: reboot required: Xid 31 (MMU page fault) on card 1" in log
    ), log
    assert "xid_since_boot (card 1)" in log


def test_event_severity_is_the_checks_severity(tmp_path: Path, daemons: list[Fleetd]) -> None:
    config = tmp_path / "fleet.toml"
    # Xid 13 is application-class; a person classes it as needing a reboot on this rig.
    config.write_text('[xid.13]\naction = "reboot"\n')
    daemon = start_fleetd(tmp_path, tmp_path / "state", config=config)
    daemons.append(daemon)
    for card, xid in ((1, 13), (2, 46), (3, 43)):
        assert daemon.post("/api/v1/sim/xid", {"card": card, "xid": xid}).status_code == 200
    wait_until(lambda: len(xid_events(daemon)) == 3, 10, "three Xid events")
    by_card = {e["card"]: e["severity"] for e in xid_events(daemon)}
    wait_until(
        lambda: all(c["severity"] != "ok" for c in checks_of(daemon, "xid_since_boot")[1:4]),
        10,
        "the xid checks judged",
    )
    checks = {c["card"]: c["severity"] for c in checks_of(daemon, "xid_since_boot")}
    assert by_card == {1: "critical", 2: "critical", 3: "warning"}
    assert {card: checks[card] for card in (1, 2, 3)} == by_card


HOLD_LOCK = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()  # held until the test closes our stdin
db.execute("ROLLBACK")
"""


def kernel_log_check(daemon: Fleetd) -> dict[str, object]:
    (check,) = checks_of(daemon, "kernel_log")
    return check


def test_a_locked_store_makes_the_rig_blind_then_the_xid_is_stored_once(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    config = tmp_path / "fleet.toml"
    # A 2 s busy timeout instead of the default 30 s: the same path, minutes less waiting.
    config.write_text(f'[store]\nurl = "sqlite:///{state_dir / "fleet.db"}?timeout=2"\n')
    daemon = start_fleetd(tmp_path, state_dir, config=config)
    daemons.append(daemon)
    assert kernel_log_check(daemon)["severity"] == "ok"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(daemon.state_dir / "fleet.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        assert daemon.post("/api/v1/sim/xid", {"card": 1, "xid": 31}).status_code == 200
        # The store's busy timeout (2 s here) runs out under the follower: it is down, and says so.
        wait_until(
            lambda: kernel_log_check(daemon)["severity"] == "warning", 60, "kernel_log warning"
        )
        message = str(kernel_log_check(daemon)["message"])
        assert "kernel-log follower down since" in message
        assert "database is locked" in message
        assert xid_events(daemon) == []
    finally:
        if holder.stdin is not None:
            holder.stdin.close()  # release the lock
        holder.wait(30)
        if holder.stdout is not None:
            holder.stdout.close()
    wait_until(lambda: kernel_log_check(daemon)["severity"] == "ok", 60, "kernel_log ok again")
    assert "blind for" in str(kernel_log_check(daemon)["message"])
    wait_until(lambda: len(daemon_events(daemon)) >= 2, 30, "the blind spell's two events")
    back, down = daemon_events(daemon)[:2]
    assert str(down["message"]).startswith("kernel-log follower down: ")
    assert down["severity"] == "warning"
    assert str(back["message"]).startswith("kernel-log follower back after ")
    blind_s = float(str(back["message"]).split("after ")[1].split(" s")[0])
    assert blind_s >= 0
    events = xid_events(daemon)
    assert [(e["card"], e["xid"]) for e in events] == [(1, 31)], "stored exactly once"
    assert daemon.get("/api/v1/status").json()["cards"][1]["xid_since_boot"] == 1


def daemon_events(daemon: Fleetd) -> list[dict[str, object]]:
    events = daemon.get("/api/v1/events?kind=daemon&limit=100").json()
    return [e for e in events if "kernel-log follower" in str(e["message"])]
