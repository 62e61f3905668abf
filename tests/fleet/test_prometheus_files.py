"""The shipped Prometheus files pass promtool: config, rules, and a unit test per alert."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support.deploy import PROMETHEUS, RULE_TESTS, RULES, alert_names
from tests.support.external import require_program

pytestmark = pytest.mark.external


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    binary = require_program("promtool", "prometheus")
    return subprocess.run(
        [binary, *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_scrape_config_and_its_rigs_file_are_valid() -> None:
    result = promtool("check", "config", PROMETHEUS / "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_the_rules_are_valid() -> None:
    result = promtool("check", "rules", RULES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_names())} rules found" in result.stdout


@pytest.mark.parametrize("unit", RULE_TESTS, ids=lambda path: path.stem)
def test_rule_unit_tests_pass(unit: Path) -> None:
    result = promtool("test", "rules", unit)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_unit_test_that_sees_it_fire() -> None:
    """An alert no test expects to fire could be broken without anyone noticing."""
    firing: set[str] = set()
    for unit in RULE_TESTS:
        # alertname: X followed by a non-empty exp_alerts list
        pattern = r"alertname: (\w+)\s*\n\s*exp_alerts:\s*\n\s*- exp_labels"
        firing.update(re.findall(pattern, unit.read_text()))
    assert set(alert_names()) - firing == set()
    assert {"CmpfleetRigDown", "CmpfleetRebootRequired", "CmpfleetGpuLost"} <= set(alert_names())
    assert {"CmpfleetGpuVramLocked", "CmpfleetGpuPowerBrake", "CmpfleetEngineNotReady"} <= set(
        alert_names()
    )


def test_a_broken_rule_fails_its_unit_test(tmp_path: Path) -> None:
    """The unit tests can fail: the same tests against a rule that never fires do."""
    (tmp_path / "tests").mkdir()
    broken = RULES.read_text().replace("cmpfleet_gpu_lost == 1", "cmpfleet_gpu_lost == 2")
    (tmp_path / "cmpfleet.rules.yml").write_text(broken)
    unit = tmp_path / "tests" / "gpu_lost.yml"
    unit.write_text((PROMETHEUS / "tests" / "gpu_lost.yml").read_text())
    result = promtool("test", "rules", unit)
    assert result.returncode != 0
    assert "FAILED" in result.stdout + result.stderr
