"""An empty state dir is refused, never read as the current directory (issue 36).

``Path("")`` is ``.``: fleetd would have used it and narrowed it to 0700 (``/`` under
systemd). Both ways of naming it say so in one line and exit 2 (systemd does not retry).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.fleetd import run_fleetd


def with_empty_state_dir(cwd: Path, module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS`` in ``cwd`` with ``CMPFLEET_STATE_DIR=""`` and no other
    CMPFLEET_/FLEETCTL_ variable (the test's own environment must not stand in)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CMPFLEET_", "FLEETCTL_"))}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env={**env, "CMPFLEET_STATE_DIR": ""},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_empty_state_dir_flag_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text("")
    result = run_fleetd("--state-dir", "", "--simulate", "healthy", "--config", str(config))
    assert result.returncode == 2
    assert "the state dir is empty" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_empty_state_dir_variable_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text("")
    before = oct(tmp_path.stat().st_mode & 0o777)
    result = with_empty_state_dir(
        tmp_path, "daemon.fleetd", "--simulate", "healthy", "--config", str(config)
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "fleetd: CMPFLEET_STATE_DIR: the state dir is empty: give a directory "
        "(default /var/lib/cmpfleet)"
    ]
    assert oct(tmp_path.stat().st_mode & 0o777) == before  # the directory is not narrowed
    assert not (tmp_path / "fleet.db").exists()


def test_fleetctl_refuses_an_empty_state_dir_variable_instead_of_reading_cwd(
    tmp_path: Path,
) -> None:
    """fleetctl looked for the local token in ``./fleetd.token``: a stray file there would
    have been sent to the daemon as its token. It says the variable is empty instead."""
    (tmp_path / "fleetd.token").write_text("a" * 43 + "\n")
    result = with_empty_state_dir(
        tmp_path, "daemon.fleetctl", "--url", "http://127.0.0.1:9", "events"
    )
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "CMPFLEET_STATE_DIR is empty" in line and "Traceback" not in result.stderr
