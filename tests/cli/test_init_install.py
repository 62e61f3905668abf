"""``fleetctl init``: the baseline written into the config (``fleetd install``: tests/daemon)."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config import load_settings
from tests.support.cli import one_clean_line
from tests.support.cli import run_fleetctl_here as fleetctl
from tests.support.nodes import KINDS, make_node, snapshot

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=5)

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


def test_init_writes_a_reboot_command_this_host_has(tmp_path: Path) -> None:
    """A host without systemctl (seen on a real GPU host) gets one it has, or a note."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutdown = bin_dir / "shutdown"
    shutdown.write_text("#!/bin/sh\n")
    shutdown.chmod(0o755)
    config = tmp_path / "with-shutdown.toml"
    result = fleetctl(
        "init", "--simulate", "healthy", "--output", str(config), env={"PATH": str(bin_dir)}
    )
    assert result.returncode == 0, result.stderr
    assert load_settings(config, environ={}).recovery.reboot_command == ["shutdown", "-r", "now"]
    assert "no systemctl on this host" in config.read_text()

    shutdown.unlink()
    bare = tmp_path / "bare.toml"
    result = fleetctl(
        "init", "--simulate", "healthy", "--output", str(bare), env={"PATH": str(bin_dir)}
    )
    assert result.returncode == 0, result.stderr
    text = bare.read_text()
    assert '\n# reboot_command = ["systemctl", "reboot"]' in text
    assert "\nreboot_command = " not in text
    assert "found none of systemctl, shutdown, reboot on this host" in text
    load_settings(bare, environ={})  # still a valid config (the default applies, and warns)


@pytest.mark.parametrize("kind", ["char-device", "fifo", "directory"])
def test_init_refuses_an_output_that_is_no_regular_file_and_leaves_it(
    tmp_path: Path, kind: str
) -> None:
    """``init --force --output /dev/null`` as root once turned /dev/null into a config."""
    node = make_node(kind, tmp_path / "fleet.toml")
    before = snapshot(node)
    result = fleetctl("init", "--simulate", "healthy", "--output", str(node), "--force")
    assert result.returncode == 1
    line = one_clean_line(result.stderr)
    assert line.startswith(f"fleetctl: not writing {node}: it is {KINDS[kind]}"), line
    assert snapshot(node) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleet.toml"]


def test_init_writes_a_symlinked_config_through_its_link(tmp_path: Path) -> None:
    managed = tmp_path / "managed.toml"
    managed.write_text("[rig]\ncard_count = 3\n")
    managed.chmod(0o600)
    link = tmp_path / "fleet.toml"
    link.symlink_to(managed)
    result = fleetctl("init", "--simulate", "healthy", "--output", str(link), "--force")
    assert result.returncode == 0, result.stderr
    assert f"wrote {managed} (through the link {link})" in result.stdout
    assert link.is_symlink() and "card_count = 4" in managed.read_text()
    assert managed.stat().st_mode & 0o777 == 0o600  # the person's mode is kept
    assert load_settings(link, environ={}).rig.card_count == 4  # what fleetd reads changed


def test_init_force_keeps_the_files_power_cap_unless_the_flag_says_otherwise(
    tmp_path: Path,
) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text("[rig]\npower_cap_w = 170.0\n")
    args = ("init", "--simulate", "healthy", "--output", str(config), "--force")
    assert fleetctl(*args).returncode == 0
    assert load_settings(config, environ={}).rig.power_cap_w == 170.0
    assert fleetctl(*args, "--power-cap-w", "175").returncode == 0
    assert load_settings(config, environ={}).rig.power_cap_w == 175.0
    fresh = tmp_path / "fresh.toml"  # no cap in the file: the default one is recorded
    fresh.write_text("[rig]\n")
    assert (
        fleetctl("init", "--simulate", "healthy", "--output", str(fresh), "--force").returncode == 0
    )
    assert load_settings(fresh, environ={}).rig.power_cap_w == 180.0


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
