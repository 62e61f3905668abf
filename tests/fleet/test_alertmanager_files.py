"""The shipped Alertmanager routing is valid and sends each severity where it says."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.deploy import ALERTMANAGER
from tests.support.external import require_program

pytestmark = pytest.mark.external


def amtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = require_program("amtool", "prometheus-alertmanager")
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=60, check=False)


def test_the_routing_config_is_valid() -> None:
    result = amtool("check-config", str(ALERTMANAGER))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (["severity=critical", "alertname=CmpfleetRebootRequired", "rig=rig1"], "pager"),
        (["severity=critical", "alertname=CmpfleetRigDown", "rig=rig2"], "pager"),
        (["severity=warning", "alertname=CmpfleetGpuXid", "rig=rig1"], "team"),
        (["severity=warning", "alertname=CmpfleetKernelLogBlind"], "team"),
    ],
)
def test_critical_alerts_page_and_warnings_go_to_the_team(labels: list[str], receiver: str) -> None:
    result = amtool("config", "routes", "test", f"--config.file={ALERTMANAGER}", *labels)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receiver
