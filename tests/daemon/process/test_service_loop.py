"""The watchdog's health verdict: a crashed background thread withholds the ping.

A thread whose loop died (``hwcheck.threads``) reports to fleetd's ``CrashBoard``; the
service loop then names it as the reason to withhold ``WATCHDOG=1``, so systemd restarts
fleetd instead of letting it run without its recovery worker or store writer.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any, cast

from daemon.config import PollSettings
from daemon.rig.kernellog_health import FollowerHealth
from daemon.rig.monitor import RigMonitor
from daemon.sdnotify import Notifier
from daemon.service_loop import ServiceLoop
from hwcheck.threads import CrashBoard, run_in_thread
from tests.support.cards import make_rig


def loop_for(crashes: CrashBoard) -> ServiceLoop:
    monitor = RigMonitor("boot-1", 3)
    monitor.add_sample(make_rig())
    monitor.set_results([])  # a poll just ended: polls are fresh
    api = SimpleNamespace(alive=lambda: True)
    follower = SimpleNamespace(health=FollowerHealth())
    return ServiceLoop(
        monitor,
        cast(Any, api),
        cast(Any, follower),
        PollSettings(),
        Notifier({}),
        threading.Event(),
        crashes,
    )


def test_a_healthy_daemon_has_no_reason_to_withhold_the_ping() -> None:
    assert loop_for(CrashBoard()).unhealthy_reason() is None


def test_a_crashed_thread_withholds_the_ping_naming_the_thread_and_error() -> None:
    crashes = CrashBoard()
    loop = loop_for(crashes)

    def broken_worker() -> None:
        raise RuntimeError("queue vanished")

    crashed = run_in_thread("recovery", broken_worker, on_crash=crashes.report)
    assert crashed.join(10)
    assert loop.unhealthy_reason() == "the recovery thread crashed (RuntimeError: queue vanished)"
