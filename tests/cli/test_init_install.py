"""``fleetctl init``: the baseline written into the config (``fleetd install``: tests/daemon)."""

from __future__ import annotations

from pathlib import Path

from daemon.config import load_settings
from tests.support.cli import run_fleetctl as fleetctl

ROOT = Path(__file__).resolve().parents[2]


def test_init_records_the_baseline_and_checks_pass_against_it(tmp_path: Path) -> None:
    config = tmp_path / "etc" / "fleet.toml"
    result = fleetctl("init", "--simulate", "healthy-8", "--output", str(config))
    assert result.returncode == 0, result.stderr
    assert config.stat().st_mode & 0o777 == 0o640
    # A new config is the documented example with the baseline written in.
    assert config.read_text().startswith(EXAMPLE.read_text().splitlines()[0])
    settings = load_settings(config, environ={})
    assert settings.rig.card_count == 8
    assert settings.rig.memory_total_mib == 65536
    assert len(settings.rig.pcie_baseline) == 8
    assert {(b.gen, b.width) for b in settings.rig.pcie_baseline.values()} == {(2, 4)}
    assert fleetctl("check", "--simulate", "healthy-8", "--config", str(config)).returncode == 0
    # The same config on a 4-card rig: the card count no longer matches.
    assert fleetctl("check", "--simulate", "healthy", "--config", str(config)).returncode == 2


def test_init_never_overwrites_without_force(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text("# mine\n")
    refused = fleetctl("init", "--simulate", "healthy", "--output", str(config))
    assert refused.returncode == 2
    assert "exists" in refused.stderr and "--force" in refused.stderr
    assert config.read_text() == "# mine\n"
    assert (
        fleetctl("init", "--simulate", "healthy", "--output", str(config), "--force").returncode
        == 0
    )
    assert "card_count = 4" in config.read_text()


def test_init_refuses_a_locked_card_as_baseline_unless_forced(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    refused = fleetctl("init", "--simulate", "locked-vram", "--output", str(config))
    assert refused.returncode == 1
    assert "card(s) 2 report locked VRAM" in refused.stderr
    assert not config.exists()
    forced = fleetctl("init", "--simulate", "locked-vram", "--output", str(config), "--force")
    assert forced.returncode == 0
    assert config.read_text().startswith("# WARNING: a card reports 8192 MiB")


def test_init_never_writes_a_simulated_baseline_to_the_system_config() -> None:
    result = fleetctl("init", "--simulate", "healthy")
    assert result.returncode == 2
    assert "pass --output FILE" in result.stderr


EXAMPLE = ROOT / "daemon" / "examples" / "fleet.toml"


def test_init_writes_into_the_commented_config_and_shows_the_diff(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    mine = EXAMPLE.read_text().replace(
        "power_cap_tolerance_w = 2.0", "power_cap_tolerance_w = 5.0  # loose on purpose"
    )
    mine = mine.replace(
        '# "0000:01:00.0" = { gen = 2, width = 4 }',
        '# "0000:01:00.0" = { gen = 2, width = 4 }\n"0000:99:00.0" = { gen = 3, width = 16 }',
    )
    config.write_text(mine)
    config.chmod(0o600)
    args = ("init", "--simulate", "healthy-8", "--output", str(config))
    refused = fleetctl(*args)
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert any(line.startswith("+card_count = 8") for line in refused.stdout.splitlines())
    assert config.read_text() == mine
    forced = fleetctl(*args, "--force")
    assert forced.returncode == 0, forced.stderr
    assert any(
        line.startswith("+card_count = 8  # recorded by") for line in forced.stdout.splitlines()
    )
    assert any(line.startswith('-"0000:99:00.0"') for line in forced.stdout.splitlines())
    text = config.read_text()
    kept = iter(text.splitlines())  # every comment and unrelated key, in its order
    assert all(line in kept for line in mine.splitlines() if "0000:99:00.0" not in line)
    assert "power_cap_tolerance_w = 5.0  # loose on purpose" in text
    assert config.stat().st_mode & 0o777 == 0o600  # a private config stays private
    settings = load_settings(config, environ={})
    assert settings.rig.card_count == 8 and len(settings.rig.pcie_baseline) == 8
    assert settings.rig.power_cap_tolerance_w == 5.0
    again = fleetctl(*args, "--force", "--json")
    assert again.returncode == 0, again.stderr
    assert '"changed": false' in again.stdout
    assert config.read_text() == text


def test_init_records_per_card_caps_beside_the_rigs_and_keeps_them(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    result = fleetctl(
        "init", "--simulate", "healthy-8", "--output", str(config), "--power-cap-w", "175",
        "--card-power-cap-w", "0-3=180", "--card-power-cap-w", "0000:81:00.0=170",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rig = load_settings(config, environ={}).rig
    assert rig.power_cap_w == 175.0
    assert rig.power_cap_w_by_card == {"0-3": 180.0, "0000:81:00.0": 170.0}
    # A later init without them leaves them be (the baseline keys are rewritten, not these).
    again = fleetctl("init", "--simulate", "healthy-8", "--output", str(config), "--force")
    assert again.returncode == 0, again.stderr
    assert load_settings(config, environ={}).rig.power_cap_w_by_card == rig.power_cap_w_by_card
    bad = fleetctl("init", "--simulate", "healthy", "--output", str(tmp_path / "x.toml"),
                   "--card-power-cap-w", "0=900")  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        "fleetctl: --card-power-cap-w 0: Input should be less than or equal to 400"
    )
