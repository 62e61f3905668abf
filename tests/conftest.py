"""What every test process shares: the processes it starts end with it, however it ends.

``$SIM_ENGINE_WATCH_PID`` names this process (each xdist worker its own): a simulated
engine started under it, by a fleetd or a test, exits when it is gone
(``serving.sim.lifetime``), so a SIGTERM'd or killed run leaves no engine behind, not even
one that ignores signals. A SIGTERM to this process becomes a KeyboardInterrupt, as Ctrl-C
is, so pytest still runs the fixtures' teardown (fleetd, Prometheus, PostgreSQL stopped).
"""

from __future__ import annotations

import os
import signal
from types import FrameType

import pytest

from serving.sim.lifetime import WATCH_VARIABLE
from tests.support import prefork, schedule

os.environ[WATCH_VARIABLE] = str(os.getpid())


def _interrupted(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt("SIGTERM")


signal.signal(signal.SIGTERM, _interrupted)
# Started in the background by a shell without job control (`scripts/dev test &`), this
# process inherits SIGINT ignored, and so would every fleetctl, engine and fleetd it starts:
# the tests of Ctrl-C and of vLLM's stop signal would fail for the way they were launched.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: pytest.Config) -> None:
    """Under xdist, the controller starts the one fleetd launcher its workers share.

    ``tests.support.prefork``: fleetd and fleetctl forked from a process that imported them
    once, instead of a fresh interpreter per start (issue 38).
    """
    if os.environ.get("PYTEST_XDIST_WORKER") is None and config.getoption("numprocesses", None):
        prefork.share()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files in the order ``tests.support.schedule`` gives: the long ones longest first.

    ``scripts/dev test`` hands whole files to ten xdist workers in collection order
    (``--dist loadfile --no-loadscope-reorder``), so no long file starts last and runs on
    alone after the others are done.
    """
    items[:] = schedule.in_run_order(items)
