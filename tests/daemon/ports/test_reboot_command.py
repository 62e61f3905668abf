"""A reboot program that is not on this host degrades fleetd instead of stopping it.

The ``reboot_command`` check names the program and the key; the confirmed reboot refuses
with the same words (``tests/recovery/test_executors.py``); fleetd starts and says it in
its log (``tests/daemon/ports/test_forbidden_moves.py`` starts one). Real files on this host.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from daemon.config import load_settings
from daemon.ports.reboot import HostCommandRunner, SimulatedHostCommands, missing_host_programs
from hwcheck.checks import reboot_command
from hwcheck.checks.readings import Readings
from hwcheck.model import CheckResult, Severity
from tests.support.cards import make_input


def judged(runner: HostCommandRunner) -> CheckResult:
    """The registry's ``reboot_command`` check on the runner's reading."""
    inp = replace(make_input(), readings=Readings(host_commands=runner.reading()))
    [result] = reboot_command.check(inp)
    return result


def test_a_missing_program_is_a_warning_naming_it_and_its_key(tmp_path: Path) -> None:
    runner = HostCommandRunner([str(tmp_path / "no-such-reboot")], ["ipmi-cycle-nowhere", "-y"])
    result = judged(runner)
    assert result.severity is Severity.WARNING
    assert result.id == "reboot_command" and result.card is None
    assert f"[recovery] reboot_command: '{tmp_path / 'no-such-reboot'}'" in result.message
    assert "[recovery] power_cycle_command: 'ipmi-cycle-nowhere'" in result.message
    assert "fleetctl reboot --confirm cannot run it" in result.message
    assert "shutdown" in result.remedy
    assert runner.unavailable(False) is not None and runner.unavailable(True) is not None


def test_a_program_that_is_here_passes(tmp_path: Path) -> None:
    program = tmp_path / "rig-reboot"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    runner = HostCommandRunner([str(program), "--now"], None)
    result = judged(runner)
    assert result.severity is Severity.OK
    assert runner.unavailable(False) is None and runner.unavailable(True) is None


def test_under_simulate_no_host_program_is_judged() -> None:
    commands = SimulatedHostCommands(lambda: "boot", ["no-such-program-here"], None)
    assert commands.reading() is None and commands.unavailable(False) is None


def test_fleetd_loads_a_config_naming_a_missing_program(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text('[recovery]\nreboot_command = ["no-such-systemctl", "reboot"]\n')
    settings = load_settings(config, environ={})
    (missing,) = missing_host_programs(settings)
    assert "reboot_command: 'no-such-systemctl' is not an executable program" in missing
