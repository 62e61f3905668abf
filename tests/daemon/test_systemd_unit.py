"""The unit file: systemd-analyze verify, and the settings the product depends on."""

from __future__ import annotations

import configparser
import subprocess
import sys
from pathlib import Path

from tests.support.external import require_program

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "fleetd.service"


def unit_settings() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(UNIT)
    return parser


def test_systemd_analyze_verify_passes(tmp_path: Path) -> None:
    analyze = require_program("systemd-analyze", "systemd")
    # verify checks that ExecStart exists: point it at this checkout's real fleetd.
    fleetd = Path(sys.executable).with_name("fleetd")
    assert fleetd.exists(), f"{fleetd} missing: is cmpfleet installed in this venv?"
    text = UNIT.read_text().replace("/opt/cmpfleet/venv/bin/fleetd", str(fleetd))
    unit = tmp_path / "fleetd.service"
    unit.write_text(text)
    result = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "fleetd.service" not in result.stderr, result.stderr


def test_unit_keeps_the_engine_alive_and_uses_notify() -> None:
    service = unit_settings()["Service"]
    assert service["Type"] == "notify"
    assert service["KillMode"] == "process"
    assert service["Restart"] == "on-failure"
    assert int(service["WatchdogSec"]) >= 10
    assert int(service["RestartSec"]) >= 1, "RestartSec=100ms exhausts StartLimitBurst at once"
    # Above fleetd's own graceful shutdown plus an engine stop (stop_timeout_s twice).
    assert int(service["TimeoutStopSec"]) > 2 * 60
