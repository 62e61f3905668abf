"""``driver_version`` as a user meets it: a half-done upgrade and a pinned driver."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import run_fleetctl_here as fleetctl

BUILTIN = Path(__file__).resolve().parents[2] / "hwcheck" / "sim" / "scenarios"


def _driver_check(doc: dict[str, object]) -> dict[str, str]:
    checks = doc["checks"]
    assert isinstance(checks, list)
    (found,) = [c for c in checks if c["id"] == "driver_version"]
    return dict(found)


def test_a_kernel_module_older_than_the_library_warns(tmp_path: Path) -> None:
    scenario = tmp_path / "half-upgraded.toml"
    scenario.write_text(
        (BUILTIN / "healthy.toml").read_text() + '\nkernel_module_version = "575.64.03"\n'
    )
    result = fleetctl("check", "--simulate", str(scenario), "--json")
    assert result.returncode == 1, result.stderr
    check = _driver_check(json.loads(result.stdout))
    assert check["severity"] == "warning"
    assert check["message"] == "NVML library 580.95.05 but kernel module 575.64.03 loaded"
    assert "reboot the host" in check["remedy"]


def test_a_driver_other_than_the_pinned_one_warns(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text('[rig]\ndriver_version = "570.172.08"\n')
    result = fleetctl("check", "--simulate", "healthy", "--config", str(config), "--json")
    assert result.returncode == 1, result.stderr
    check = _driver_check(json.loads(result.stdout))
    assert check["message"] == (
        "driver 580.95.05 loaded, this rig expects 570.172.08 ([rig] driver_version)"
    )


def test_a_healthy_rig_names_library_and_module() -> None:
    result = fleetctl("check", "--simulate", "healthy", "--json")
    assert result.returncode == 0, result.stderr
    check = _driver_check(json.loads(result.stdout))
    assert check["message"] == "driver 580.95.05 (library 580.95.05, kernel module 580.95.05)"


def test_a_malformed_pinned_version_is_a_one_line_config_error(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text('[rig]\ndriver_version = "latest"\n')
    result = fleetctl("check", "--simulate", "healthy", "--config", str(config))
    assert result.returncode == 3
    assert "rig.driver_version" in result.stderr
    assert "Traceback" not in result.stderr
