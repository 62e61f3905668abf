"""Test helpers shared across test modules (once in tests.daemon.engine.test_engine_e2e).

Helpers live only in tests/support: a test never imports another test module.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd


def serving(daemon: Fleetd) -> dict[str, object]:
    return daemon.get("/api/v1/status").json()["serving"]


def fleetctl(daemon: Fleetd, *args: str) -> subprocess.CompletedProcess[str]:
    return run_fleetctl_here(
        "--url", daemon.url, *args, env={"CMPFLEET_STATE_DIR": str(daemon.state_dir)}
    )


def healthy_with_engine(path: Path, engine_table: str) -> Path:
    """The built-in ``healthy`` scenario with an ``[engine]`` table of the test's own."""
    builtin = Path(__file__).resolve().parents[2] / "hwcheck" / "sim" / "scenarios" / "healthy.toml"
    path.write_text(builtin.read_text() + engine_table)
    return path


def fast_config(tmp_path: Path, extra: str = "") -> Path:
    """Quick probes, scrapes and restarts (5 s, 15 s and 5 s by default).

    Not quicker than needed: an idle fleetd's CPU follows its probes and scrapes, and the
    suite runs some two hundred daemons on two cores (0.3 s probes and 0.5 s scrapes cost
    a sixth more CPU than these).
    """
    config = tmp_path / "fleet.toml"
    config.write_text(
        "[serving]\nprobe_interval_s = 0.5\nstop_timeout_s = 5\nmetrics_interval_s = 1.0\n"
        "[recovery]\nbackoff_base_s = 0.5\nbackoff_max_s = 1\n" + extra
    )
    return config
