"""``[guard] listen`` on fleetd's own API address: one line, exit 2 (issue 36)."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.startup import guard_address_clash
from tests.support.fleetd import free_port, run_fleetd


def test_the_guard_on_the_api_address_refuses_the_start_in_one_line(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "fleet.toml"
    config.write_text(f'[guard]\nlisten = "127.0.0.1:{port}"\n')
    result = run_fleetd(
        "--simulate", "healthy", "--state-dir", str(tmp_path / "state"), "--config",
        str(config), "--listen", f"127.0.0.1:{port}",
    )  # fmt: skip
    assert result.returncode == 2  # a person's to fix: systemd does not retry
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "that is fleetd's own API address" in lines[0]
    assert "another program" not in result.stderr


@pytest.mark.parametrize(
    ("guard", "api", "clash"),
    [
        ("127.0.0.1:8098", "127.0.0.1:8098", True),
        ("0.0.0.0:8098", "127.0.0.1:8098", True),
        ("127.0.0.1:8098", "[::]:8098", True),
        ("127.0.0.1:8098", "127.0.0.1:8099", False),
        ("127.0.0.1:8098", "10.0.0.2:8098", False),
        ("127.0.0.1:0", "127.0.0.1:0", False),
        (None, "127.0.0.1:8098", False),
    ],
)
def test_which_addresses_clash(guard: str | None, api: str, clash: bool) -> None:
    assert (guard_address_clash(guard, api) is not None) is clash
