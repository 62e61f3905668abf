"""Faults never blind recovery: a sick store, or a fleetd killed mid-decision (issue 22).

Real fleetd processes with the real simulated engine: the store is locked by a real second
process holding ``BEGIN EXCLUSIVE``, filled up on a real tmpfs, overwritten with random
bytes while fleetd runs; the crash tests end fleetd at a named fault point
(``CMPFLEET_FAULT_POINT``, an ``os._exit`` like a kill -9) and restart it on the same state
dir. Each time the hardware Xid must latch and stop the engine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from daemon import fault_points
from daemon.ports.latch import LATCH_FILE
from daemon.statedir import StateDir
from daemon.store import Store
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.parser import parse_xid
from hwcheck.kernellog.records import KernelLogCursor
from hwcheck.model import ClassifiedXid
from tests.support.cli import run_fleetctl_here
from tests.support.engine_e2e import fast_config, serving
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until
from tests.support.small_disk import _fill, small_fs
from tests.support.sqlite_lock import lock_held

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=40)

__all__ = ["small_fs"]  # the tmpfs fixture, shared with the store-health tests

LATCH_WITHIN_S = 2.0
STOPPED_WITHIN_S = 10.0  # the simulated engine's graceful stop, on a loaded machine


@pytest.fixture
def daemons() -> Iterator[list[Fleetd]]:
    started: list[Fleetd] = []
    yield started
    stop_all(started)


def recovery(daemon: Fleetd) -> dict[str, Any]:
    block: dict[str, Any] = daemon.get("/api/v1/status").json()["recovery"]
    return block


def ready_rig(tmp_path: Path, state: Path, daemons: list[Fleetd], **env: str) -> Fleetd:
    daemon = start_fleetd(tmp_path, state, config=fast_config(tmp_path), env=env or None)
    daemons.append(daemon)
    wait_until(lambda: serving(daemon)["state"] == "ready", 30, "engine ready")
    return daemon


def inject(daemon: Fleetd, xid: int, card: int = 1) -> None:
    assert daemon.post("/api/v1/sim/xid", {"card": card, "xid": xid}).status_code == 200


def inject_then_die(daemon: Fleetd, xid: int) -> None:
    """Inject ``xid`` into a fleetd told to exit at a fault point: it may go before it answers."""
    with contextlib.suppress(httpx.RemoteProtocolError, httpx.ConnectError):
        inject(daemon, xid)


def about(reason: str, xid: int, card: int = 1) -> bool:
    """A latch reason that names Xid ``xid`` on ``card`` (its headline: ``Xid 79 (...) on card 1``)."""
    return re.match(rf"Xid {xid}\b.* on card {card}\b", reason) is not None


def assert_latches_and_stops(daemon: Fleetd, xid: int) -> float:
    """Inject ``xid``; the latch within 2 s, the engine stopped soon after; the latch's delay."""
    began_s = time.monotonic()
    inject(daemon, xid)
    wait_until(lambda: recovery(daemon)["reboot_required"], LATCH_WITHIN_S, f"Xid {xid} latched")
    latched_after_s = time.monotonic() - began_s
    assert about(recovery(daemon)["reason"], xid)
    wait_until(
        lambda: serving(daemon)["state"] == "stopped", STOPPED_WITHIN_S, "the engine stopped"
    )
    return latched_after_s


def test_an_xid_79_latches_and_stops_while_the_store_is_exclusively_locked(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    state = tmp_path / "state"
    daemon = ready_rig(tmp_path, state, daemons)
    with lock_held(state / "fleet.db", "EXCLUSIVE", hold_s=45):
        assert_latches_and_stops(daemon, 79)
        # The latch is on disk beside the store, which cannot have it yet.
        document = json.loads((state / LATCH_FILE).read_text())
        assert about(document["reason"], 79) and document["reason"].startswith("Xid 79 ")
    # The store catches up once the lock is gone: the latch and the decision are history.
    wait_until(
        lambda: any(d["action"] == "stop_and_latch" for d in recovery(daemon)["decisions"]),
        60,
        "the decision stored",
    )
    # The decisions are served from memory: the Xid's own write may still be retrying
    # (the follower's backoff), so it is waited for, not read once.
    wait_until(
        lambda: [e["xid"] for e in daemon.get("/api/v1/events?kind=xid").json()] == [79],
        60,
        "the Xid stored",
    )
    events = daemon.get("/api/v1/events?kind=xid").json()
    # Stored once the lock was gone; the kernel's own time of the Xid is kept beside it.
    kernel, stored = (datetime.fromisoformat(events[0][k]) for k in ("ts_kernel", "ts"))
    assert kernel <= stored


def test_an_xid_79_latches_and_stops_on_a_full_disk(
    tmp_path: Path, small_fs: Path, daemons: list[Fleetd]
) -> None:
    daemon = ready_rig(tmp_path, small_fs / "state", daemons)
    filler = _fill(small_fs)
    try:
        assert_latches_and_stops(daemon, 79)
    finally:
        filler.unlink()


def test_a_store_overwritten_while_running_leaves_status_and_recovery_working(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    state = tmp_path / "state"
    daemon = ready_rig(tmp_path, state, daemons)
    size = (state / "fleet.db").stat().st_size
    with (state / "fleet.db").open("r+b") as db:
        db.write(os.urandom(max(size, 65536)))
    answer = daemon.get("/api/v1/status")
    assert answer.status_code == 200, answer.text
    human = run_fleetctl_here("--url", daemon.url, "status")
    assert "not fleetd's JSON API" not in human.stderr, human.stderr
    assert_latches_and_stops(daemon, 31)
    assert daemon.get("/metrics").status_code == 200
    # The history may still be read from the WAL; when it cannot, one line, 503.
    history = daemon.get("/api/v1/history?span=1h")
    assert history.status_code in (200, 503), history.text
    if history.status_code == 503:
        detail = history.json()["detail"]
        assert "fleet.db" in detail and "\n" not in detail
    assert "Traceback" not in daemon.log().split("fleetd ready", 1)[1]


@pytest.mark.parametrize("point", fault_points.POINTS)
def test_a_kill_between_reading_an_xid_and_recording_its_decision_is_reconciled(
    tmp_path: Path, daemons: list[Fleetd], point: str
) -> None:
    state = tmp_path / "state"
    first = ready_rig(tmp_path, state, daemons, **{fault_points.ENV: point})
    inject_then_die(first, 79)
    assert first.proc.wait(30) == fault_points.EXIT_CODE, first.log()
    assert f"fault point {point} reached" in first.log()
    again = start_fleetd(tmp_path, state, config=fast_config(tmp_path))
    daemons.append(again)
    wait_until(lambda: recovery(again)["reboot_required"], 10, "the latch after the restart")
    assert about(recovery(again)["reason"], 79)
    wait_until(lambda: serving(again)["state"] == "stopped", 20, "the adopted engine stopped")
    assert serving(again)["pid"] is None
    # Decided once more at most: a restart with the latch set and no engine owes nothing.
    assert again.stop() == 0
    third = start_fleetd(tmp_path, state, config=fast_config(tmp_path))
    daemons.append(third)
    assert "reconciles this boot's stored faults" not in third.log()
    assert recovery(third)["reboot_required"] is True


def test_an_xid_stored_without_its_decision_is_decided_at_the_next_start(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    """The original bug: the Xid is in the store (no longer new), the engine still serves.

    fleetd is killed with the engine ready, then the store gets this boot's Xid 79 and a
    kernel-log cursor past it, as a fleetd that died before acting would have left them.
    """
    state = tmp_path / "state"
    first = ready_rig(tmp_path, state, daemons)
    pid = serving(first)["pid"]
    first.proc.kill()
    first.proc.wait()
    boot_id = StateDir(state).sim_boot_id.read_text().strip()
    line = "NVRM: Xid (PCI:0000:21:00): 79, pid=0, GPU has fallen off the bus."
    event = parse_xid(line)
    assert event is not None
    event = replace(event, boot_id=boot_id, seq=10**6)
    store = Store.open(StateDir(state).db_url)
    try:
        item = ClassifiedXid(event, XidCatalogue().classify(event))
        assert store.record_xid_and_cursor(item, KernelLogCursor(boot_id, 10**6), card=1)
    finally:
        store.close()
    again = start_fleetd(tmp_path, state, config=fast_config(tmp_path))
    daemons.append(again)
    assert "reconciles this boot's stored faults" in again.log()
    wait_until(lambda: recovery(again)["reboot_required"], 10, "the latch after the restart")
    assert about(recovery(again)["reason"], 79)
    wait_until(lambda: serving(again)["state"] == "stopped", 20, "the adopted engine stopped")
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
