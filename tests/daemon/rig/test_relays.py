"""The rig's reactions fleetd subscribes where it builds them (no relay in the runtime).

The follower's health change puts the ``kernel_log`` result in the monitor before anyone
else hears of it; a rejudge request reaches the poller, then the API's re-render; the
rollup job drops the kept chart documents only when it rolled a minute. Real store,
monitor and follower thread; the kernel log is scripted.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pytest

from daemon.config import StoreSettings
from daemon.rig.kernellog_health import put_kernel_log_result
from daemon.rig.monitor import RigMonitor
from daemon.rig.poller import Rejudge
from daemon.rig.rollup_job import RollupJob
from daemon.rig.xidpath import FollowerThread, XidPath
from daemon.store import Store
from hwcheck.checks import kernel_log as kernel_log_check
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import load_scenario
from tests.support.waiting import wait_until
from tests.support.xid_path import BOOT, XID_TEXT, scripted_host


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    yield opened
    opened.close()


def kmsg(seq: int, text: str) -> bytes:
    return f"4,{seq},{seq * 1000},-;{text}\n".encode()


def kernel_log_severity(monitor: RigMonitor) -> str | None:
    found = [r for r in monitor.view().results if r.id == kernel_log_check.CHECK_ID]
    return found[0].severity.value if found else None


def test_a_follower_down_then_back_is_in_the_monitor_before_the_next_listener_hears(
    tmp_path: Path, store: Store
) -> None:
    failing = [
        kmsg(0, "Linux version"),
        kmsg(1, XID_TEXT),
        BlockingIOError(errno.EAGAIN, "again"),
        OSError(errno.EIO, "Input/output error"),
    ]
    host, _ = scripted_host(tmp_path, [failing, [failing[0], failing[1]]])
    monitor = RigMonitor(BOOT, 3)
    follower = FollowerThread(
        host,
        XidCatalogue(),
        store,
        XidPath(store, monitor, lambda _pci: 1),
        backoff_base_s=0.05,
    )
    follower.add_health_listener(partial(put_kernel_log_result, monitor, follower.health))
    seen: list[str | None] = []  # what the API's re-render would read
    follower.add_health_listener(lambda: seen.append(kernel_log_severity(monitor)))
    try:
        assert follower.start() == 1
        wait_until(lambda: seen[-1:] == ["ok"], 10, "the follower back")
    finally:
        follower.stop()
    assert seen == ["warning", "ok"]


def test_a_rejudge_request_reaches_each_listener_in_the_order_subscribed() -> None:
    rejudge = Rejudge()
    heard: list[str] = []
    rejudge()  # asked before the poller exists: nothing to do yet
    rejudge.add_listener(lambda: heard.append("poller"))
    rejudge.add_listener(lambda: heard.append("api"))
    rejudge()
    assert heard == ["poller", "api"]


class Cache:
    def __init__(self) -> None:
        self.dropped = 0

    def rollups_changed(self) -> None:
        self.dropped += 1


def test_the_rollup_job_runs_on_the_writer_and_drops_the_charts_only_for_a_new_minute(
    tmp_path: Path, store: Store
) -> None:
    rig = SimulatedRig(load_scenario("healthy"), tmp_path / "sim")
    store.record_samples(rig.host_sources().gpu.snapshot())
    later = datetime.now(UTC) + timedelta(minutes=3)
    deferred: list[Callable[[], None]] = []
    cache = Cache()
    job = RollupJob(store, deferred.append, StoreSettings(), cache, wall_clock=lambda: later)
    job.rollup()
    assert cache.dropped == 0, "nothing runs on the scheduler's thread"
    deferred.pop()()
    assert cache.dropped == 1
    job.rollup()
    deferred.pop()()  # nothing new to roll
    assert cache.dropped == 1
