"""What every engine's recovery controller shares on a rig of several engines.

A fleetd built in process from the two-engine example (not started: nothing polls, no
engine is launched). The card fault history is the host's, like the latch: a fault, a
boot and the way the host rebooted (warm, cold) are written by whichever controller hears
them, and every controller must read them the same (escalation counts them), so there
is one history object, never a copy per controller saved over the others.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.config import load_settings
from daemon.runtime import Daemon
from daemon.startup import build_daemon
from tests.support.fleetd import free_port

EXAMPLE = Path(__file__).parents[3] / "examples" / "healthy-8-two-engines.toml"


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    settings = load_settings(
        EXAMPLE, environ={}, overrides={"web": {"listen": f"127.0.0.1:{free_port()}"}}
    )
    built = build_daemon(settings, tmp_path / "state", "healthy-8", EXAMPLE, environ={})
    try:
        yield built
    finally:
        built.shutdown(announce=False)
        built.api.close()  # bound by build_daemon; never started here


def test_every_engines_controller_reads_and_writes_the_one_fault_history(daemon: Daemon) -> None:
    (side,) = daemon.side_engines
    assert side.name == "high"
    assert side.recovery.history is daemon.recovery.history
    # What the primary's reboot notes, the side's controller sees at the next boot.
    daemon.recovery.history.new_boot("boot-a", "t0")
    daemon.recovery.history.note_reboot(cold=True)
    side.recovery.new_boot("boot-b")
    daemon.recovery.new_boot("boot-b")
    side.recovery.history.record(6, "Xid 79 (fallen off the bus)", "t1")
    side.recovery.new_boot("boot-c")
    (fault,) = daemon.recovery.history.past_faults()
    assert fault.card == 6
