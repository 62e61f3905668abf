"""Bounded config values: finite ranged durations, no coercion of booleans (issue 22)."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config import ConfigError, load_settings
from tests.support.fleetd import run_fleetd

REFUSED = [
    ("[alerts]\nrepeat_interval_s = inf", "alerts.repeat_interval_s: expected a finite duration"),
    ("[store]\nraw_retention_h = inf", "store.raw_retention_h: expected a finite duration"),
    ("[store]\nrollup_retention_days = 1e308", "store.rollup_retention_days: expected a finite"),
    ("[poll]\ninterval_s = nan", "poll.interval_s: expected a finite duration"),
    ("[recovery]\nbackoff_max_s = -1.0", "recovery.backoff_max_s: Input should be greater than 0"),
    ("[serving]\nstop_timeout_s = 1e9", "serving.stop_timeout_s: expected a finite duration"),
    ("[[alerts.webhooks]]\nurl = 'http://a'\ntimeout_s = inf", "alerts.webhooks[0].timeout_s:"),
    ("[rig]\npower_cap_w = true", "rig.power_cap_w: expected a number, not the boolean true"),
    ("[serving]\nautostart = 'yes'", "serving.autostart: expected true or false (got 'yes')"),
    ("[recovery]\ndry_run = 1", "recovery.dry_run: expected true or false (got 1)"),
]


@pytest.mark.parametrize(("toml", "expected"), REFUSED)
def test_an_unbounded_or_coerced_value_is_one_line_naming_the_key(
    tmp_path: Path, toml: str, expected: str
) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text(toml + "\n")
    with pytest.raises(ConfigError) as refused:
        load_settings(config, environ={})
    assert str(refused.value).startswith(f"{config}: ")
    assert expected in str(refused.value)
    assert "\n" not in str(refused.value)


def test_bounded_values_and_integers_for_durations_still_load(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text(
        "[alerts]\nrepeat_interval_s = 3600\n[store]\nraw_retention_h = 48\n"
        "rollup_retention_days = 365\n[serving]\nautostart = false\n"
    )
    settings = load_settings(config, environ={})
    assert settings.alerts.repeat_interval_s == 3600
    assert settings.serving.autostart is False


def test_an_environment_variable_is_bounded_and_blamed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(None, environ={"CMPFLEET_POLL_INTERVAL_S": "inf"})
    assert str(refused.value).startswith("environment CMPFLEET_POLL_INTERVAL_S: poll.interval_s")


def test_fleetd_refuses_an_infinite_repeat_interval_with_exit_2_and_one_line(
    tmp_path: Path,
) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text("[alerts]\nrepeat_interval_s = inf\n")
    result = run_fleetd(
        "--config", str(config), "--state-dir", str(tmp_path / "state"), "--simulate", "healthy"
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "alerts.repeat_interval_s" in lines[0], result.stderr
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # Malformed: refused at load. A program missing on this host only degrades fleetd
        # (the reboot_command check, tests/daemon/ports/test_reboot_command.py).
        ("[]", "expected an argv list of non-empty strings"),
        ('[""]', "expected an argv list of non-empty strings"),
        ('"systemctl reboot"', "Input should be a valid list"),
    ],
)
def test_a_malformed_reboot_command_is_refused_at_load(
    tmp_path: Path, command: str, expected: str
) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text(f"[recovery]\nreboot_command = {command}\n")
    result = run_fleetd("--config", str(config), "--state-dir", str(tmp_path / "state"))
    assert result.returncode == 2, result.stderr
    assert f"recovery.reboot_command: {expected}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
