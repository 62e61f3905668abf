"""Config files as people write them: a BOM is fine, a bad ``[store] url`` names file and key."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import run_fleetd

BOM = b"\xef\xbb\xbf"
EXIT_CONFIG = 2


def write_config(path: Path, text: str, *, bom: bool = False) -> Path:
    """The config as a rig keeps it: mode 0600 (a password in it is then no warning)."""
    path.write_bytes((BOM if bom else b"") + text.encode())
    path.chmod(0o600)
    return path


def test_a_config_saved_with_a_bom_is_read(tmp_path: Path) -> None:
    config = write_config(tmp_path / "fleet.toml", "[rig]\npower_cap_w = 180\n", bom=True)
    result = run_fleetctl_here("check", "--simulate", "healthy", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert "overall: OK" in result.stdout


def test_a_bom_file_is_still_validated(tmp_path: Path) -> None:
    config = write_config(tmp_path / "fleet.toml", "[rig]\npower_cap = 180\n", bom=True)
    result = run_fleetctl_here("check", "--simulate", "healthy", "--config", str(config))
    assert result.returncode == 3
    assert (
        result.stderr
        == f"fleetctl: {config}: unknown key 'rig.power_cap' (did you mean 'power_cap_w'?)\n"
    )


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("nosuch://db", "Can't load plugin"),
        ("sqlite:////no/such/dir/fleet.db", "directory /no/such/dir does not exist"),
        ("sqlite://", "in-memory SQLite"),
        ("not a url", "not a database URL"),
        ("postgresql+nodriver://fleet:hunter2@db/fleet", "Can't load plugin"),
    ],
)
def test_a_bad_store_url_names_file_and_key(tmp_path: Path, url: str, problem: str) -> None:
    config = write_config(tmp_path / "fleet.toml", f'[store]\nurl = "{url}"\n')
    state_dir = tmp_path / "state"
    result = run_fleetd(
        "--config", str(config), "--state-dir", str(state_dir), "--simulate", "healthy"
    )
    assert result.returncode == EXIT_CONFIG, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"fleetd: {config}: store.url: "), lines[0]
    assert problem in lines[0]
    assert "hunter2" not in result.stderr
    assert not state_dir.exists(), "fleetd touched its state dir before refusing the config"


# A database server that does not answer may come up (systemd retries: 1); a path SQLite
# cannot open is a person's to fix (2: the unit does not retry it).
EXIT_RETRY, EXIT_PERSON = 1, 2


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("where", ["postgresql", "sqlite_on_a_directory", "environment"])
def test_a_store_url_that_parses_but_cannot_connect_names_where_it_was_set(
    tmp_path: Path, where: str
) -> None:
    """The URL passes the config check; opening the database fails: one line, no traceback."""
    postgres = f"postgresql+psycopg://fleet:hunter2@127.0.0.1:{closed_port()}/fleet"
    (tmp_path / "a-directory").mkdir()
    url = f"sqlite:///{tmp_path / 'a-directory'}" if where == "sqlite_on_a_directory" else postgres
    in_file = where != "environment"
    config = write_config(
        tmp_path / "fleet.toml", f'[store]\nurl = "{url}"\n' if in_file else "[rig]\n"
    )
    config.chmod(0o600)  # it holds a password: readable by others it would also get a warning
    env = {key: value for key, value in os.environ.items() if key != "CMPFLEET_STORE_URL"}
    if not in_file:
        env["CMPFLEET_STORE_URL"] = url
    argv = [
        "--config",
        str(config),
        "--state-dir",
        str(tmp_path / "state"),
        "--simulate",
        "healthy",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "daemon.fleetd", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )

    expected = EXIT_PERSON if where == "sqlite_on_a_directory" else EXIT_RETRY
    assert result.returncode == expected, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    source = f"{config}" if in_file else "environment CMPFLEET_STORE_URL"
    assert lines[0].startswith(f"fleetd: {source}: store.url: store "), lines[0]
    cause = "unable to open database file" if where == "sqlite_on_a_directory" else "refused"
    assert cause in lines[0]
    assert "hunter2" not in result.stderr
