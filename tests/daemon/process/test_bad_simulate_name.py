"""A bad ``--simulate`` name refuses before the state dir is touched.

It once chmodded the state dir to 0700 and left ``fleetd.lock`` in it: a typo in a
scenario name changed a directory a person may have shared on purpose.
"""

from __future__ import annotations

import stat
from pathlib import Path

from tests.support.fleetd import run_fleetd


def test_a_bad_scenario_name_leaves_the_state_dir_as_it_was(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o755)
    result = run_fleetd("--simulate", "no-such-scenario", "--state-dir", str(state))
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "no-such-scenario" in lines[0], result.stderr
    assert stat.S_IMODE(state.stat().st_mode) == 0o755
    assert list(state.iterdir()) == []  # no fleetd.lock, nothing else
    missing = tmp_path / "never-made"
    again = run_fleetd("--simulate", "no-such-scenario", "--state-dir", str(missing))
    assert again.returncode == 2 and not missing.exists()
