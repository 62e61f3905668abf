"""The engine at fleetd's start and exit (``daemon/ports/engine_lifecycle.py``).

After a reboot the bring-up runs, else autostart asks the start path; at exit the engine
is stopped only with ``[serving] stop_on_exit``, and a stop that fails never stops the
exit. Recovery and the bring-up are recorders at their boundary (the answers they give).
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from daemon.ports.engine_lifecycle import autostart, stop_engine_on_exit
from recovery.facts import Trigger


class Recovery:
    def __init__(self, started: bool = False, stopped: bool = True, fails: bool = False) -> None:
        self.asked: list[tuple[str, Trigger]] = []
        self._started = started
        self._stopped = stopped
        self._fails = fails

    def request_start(self, trigger: Trigger, actor: str) -> Any:
        self.asked.append(("start", trigger))
        return SimpleNamespace(started=self._started, why_not="the latch is set")

    def request_stop(self, trigger: Trigger, actor: str) -> Any:
        self.asked.append(("stop", trigger))
        if self._fails:
            raise RuntimeError("the store is locked")
        return SimpleNamespace(stopped=self._stopped, why_not="no engine runs")


class BringUp:
    def __init__(self) -> None:
        self.ran: list[str] = []

    def run(self, boot_id: str) -> None:
        self.ran.append(boot_id)


def test_a_reboot_brings_the_rig_up_instead_of_autostarting() -> None:
    recovery, bring_up = Recovery(), BringUp()
    autostart(bring_up, recovery, "boot-2", rebooted=True, has_engine=True)
    assert (bring_up.ran, recovery.asked) == (["boot-2"], [])


def test_autostart_asks_the_start_path_and_says_why_not(caplog: pytest.LogCaptureFixture) -> None:
    recovery, bring_up = Recovery(started=False), BringUp()
    with caplog.at_level(logging.WARNING, "fleetd"):
        autostart(bring_up, recovery, "boot-1", rebooted=False, has_engine=True)
        autostart(bring_up, recovery, "boot-1", rebooted=False, has_engine=False)
    assert recovery.asked == [("start", Trigger.AUTOSTART)] * 2 and bring_up.ran == []
    said = [r.getMessage() for r in caplog.records]
    assert said == ["not autostarting the engine: the latch is set"]  # no engine: no line


def test_the_engine_outlives_fleetd_unless_stop_on_exit(caplog: pytest.LogCaptureFixture) -> None:
    recovery = Recovery()
    stop_engine_on_exit(recovery, stop_on_exit=False)
    assert recovery.asked == []
    stop_engine_on_exit(recovery, stop_on_exit=True)
    assert recovery.asked == [("stop", Trigger.SHUTDOWN)]
    with caplog.at_level(logging.WARNING, "fleetd"):
        stop_engine_on_exit(Recovery(stopped=False), stop_on_exit=True)
        stop_engine_on_exit(Recovery(fails=True), stop_on_exit=True)  # the exit goes on
    assert [r.getMessage() for r in caplog.records] == [
        "the engine did not stop on exit: no engine runs",
        "the engine could not be stopped on exit: the store is locked",
    ]
