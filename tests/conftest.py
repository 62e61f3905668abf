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

from serving.sim.lifetime import WATCH_VARIABLE

os.environ[WATCH_VARIABLE] = str(os.getpid())


def _interrupted(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt("SIGTERM")


signal.signal(signal.SIGTERM, _interrupted)
