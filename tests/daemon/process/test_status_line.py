"""The ``STATUS=`` line after each poll: the cards, the verdict the status serves, the engine.

``StatusLine`` (``daemon/service_loop.py``) is subscribed to the poller where fleetd
builds it, after the rig's judge (the line says the verdict just judged); a real monitor
and judge fed by a simulated rig, a notifier that keeps what it sent.
"""

from __future__ import annotations

from pathlib import Path

from daemon.rig.judge import RigJudge
from daemon.rig.monitor import RigMonitor
from daemon.sdnotify import Notifier
from daemon.service_loop import StatusLine
from hwcheck.checks import run_checks
from hwcheck.checks.base import CheckInput
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import load_scenario


class KeptNotifier(Notifier):
    def __init__(self) -> None:
        super().__init__({})
        self.lines: list[str] = []

    def status(self, text: str) -> bool:
        self.lines.append(text)
        return False


def test_each_poll_sends_one_line_with_the_cards_verdict_engine_and_xids(tmp_path: Path) -> None:
    rig = SimulatedRig(load_scenario("power-brake"), tmp_path / "sim")
    monitor = RigMonitor(rig.host_sources().boot_id(), 1)
    notifier = KeptNotifier()
    judge = RigJudge(monitor, lambda: None, lambda: None, lambda: None)
    line = StatusLine(monitor, lambda: "stopped", notifier)
    polled = [judge.rejudge, line.polled]  # the poller's listeners, in fleetd's order
    for listener in polled:  # before any sample: no cards, nothing judged
        listener()
    window = monitor.add_sample(rig.host_sources().gpu.snapshot())  # one braked sample: a warning
    monitor.set_results(run_checks(CheckInput(samples=window)))
    for listener in polled:
        listener()
    assert notifier.lines[0] == "0 cards unknown; engine stopped; 0 Xid since boot"
    cards = len(window[-1].cards)
    assert notifier.lines[1] == f"{cards} cards warning; engine stopped; 0 Xid since boot"
    assert line.summary() == notifier.lines[1]
