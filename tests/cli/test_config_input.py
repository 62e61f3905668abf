"""Config files as people write them: a BOM is fine, a bad ``[store] url`` names file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run_fleetctl
from tests.support.fleetd import run_fleetd

BOM = b"\xef\xbb\xbf"
EXIT_CONFIG = 2


def write_config(path: Path, text: str, *, bom: bool = False) -> Path:
    path.write_bytes((BOM if bom else b"") + text.encode())
    return path


def test_a_config_saved_with_a_bom_is_read(tmp_path: Path) -> None:
    config = write_config(tmp_path / "fleet.toml", "[rig]\npower_cap_w = 180\n", bom=True)
    result = run_fleetctl("check", "--simulate", "healthy", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert "overall: OK" in result.stdout


def test_a_bom_file_is_still_validated(tmp_path: Path) -> None:
    config = write_config(tmp_path / "fleet.toml", "[rig]\npower_cap = 180\n", bom=True)
    result = run_fleetctl("check", "--simulate", "healthy", "--config", str(config))
    assert result.returncode == 3
    assert result.stderr == f"fleetctl: {config}: unknown key 'rig.power_cap'\n"


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
