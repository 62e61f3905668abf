"""What gates a start, end to end: the cards a recipe uses, and speed problems that only warn.

Real fleetd processes on simulated rigs with the simulated engine; the recipe is the
configured one (``[serving.recipe]``, the sim engine's preset) with its ``gpus``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.engine_e2e import fleetctl, serving
from tests.support.fleetd import Fleetd, run_fleetd, start_fleetd, stop_all, wait_until

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=20)

SCENARIOS = Path(__file__).resolve().parents[3] / "hwcheck" / "sim" / "scenarios"


def eight_cards_card_7_locked(path: Path) -> Path:
    """``healthy-8`` with card 7 at the stock 8,192 MiB (the unlock did not take)."""
    cards = "\n[[cards]]\n" * 7 + "\n[[cards]]\nmemory_total_mib = 8192\n"
    path.write_text((SCENARIOS / "healthy-8.toml").read_text() + cards)
    return path


def rig_with_gpus(tmp_path: Path, scenario: Path, gpus: str) -> Fleetd:
    """A fleetd on ``scenario`` whose configured recipe (the sim engine's) uses ``gpus``."""
    home = tmp_path / gpus.replace(",", "")
    home.mkdir()
    config = home / "fleet.toml"
    config.write_text(
        "[serving]\nprobe_interval_s = 0.3\nstop_timeout_s = 5\n"
        f'[serving.recipe]\npreset = "sim-engine"\ngpus = "{gpus}"\n'
    )
    return start_fleetd(home, home / "state", simulate=str(scenario), config=config)


def test_a_locked_card_outside_the_recipes_cards_does_not_refuse_its_start(
    tmp_path: Path,
) -> None:
    scenario = eight_cards_card_7_locked(tmp_path / "rig8.toml")
    daemons: list[Fleetd] = []
    try:
        on_six = rig_with_gpus(tmp_path, scenario, "0,1,2,3,4,5")
        daemons.append(on_six)
        wait_until(lambda: serving(on_six)["state"] == "ready", 60, "the 6-card recipe ready")
        doc = on_six.get("/api/v1/status").json()
        locked = [c for c in doc["checks"] if c["id"] == "vram_unlocked" and c["card"] == 7]
        assert locked[0]["severity"] == "critical" and doc["overall"] == "critical"
        probed = [d for d in doc["recovery"]["decisions"] if d["action"] == "probe"]
        assert probed and "card 6" not in probed[0]["outcome"] and "card 5" in probed[0]["outcome"]
        assert fleetctl(on_six, "restart").returncode == 0
        on_all = rig_with_gpus(tmp_path, scenario, "all")
        daemons.append(on_all)
        assert serving(on_all)["state"] == "stopped"
        assert "not autostarting the engine: vram_unlocked (card 7)" in on_all.log()
        refused = fleetctl(on_all, "start")
        assert refused.returncode == 4, refused.stderr
        assert "vram_unlocked (card 7)" in refused.stderr
        # The status keeps the refused start typed: every reason with its own code.
        kept = on_all.get("/api/v1/status").json()["recovery"]["last_refused_start"]
        assert kept["trigger"] == "start_request"
        assert [r["code"] for r in kept["reasons"]] == ["critical_check"]
        # Latched too: the refusal carries both reasons, each with its code, not the first.
        assert on_all.post("/api/v1/sim/xid", {"card": 6, "xid": 79}).status_code == 200
        wait_until(
            lambda: on_all.get("/api/v1/status").json()["recovery"]["reboot_required"],
            30,
            "the latch",
        )
        answer = on_all.post("/api/v1/serving/start")
        assert answer.status_code == 409
        body = answer.json()
        codes = [reason["code"] for reason in body["reasons"]]
        assert body["code"] == codes[0] == "reboot_latch" and "critical_check" in codes
        assert all(reason["message"] in body["detail"] for reason in body["reasons"])
    finally:
        stop_all(daemons)


def test_the_power_brake_warns_with_the_start_and_keeps_the_rig_critical(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text("[serving]\nprobe_interval_s = 0.3\nstop_timeout_s = 5\n")
    daemon = start_fleetd(tmp_path, tmp_path / "state", simulate="power-brake", config=config)
    try:
        wait_until(lambda: serving(daemon)["state"] == "ready", 60, "the engine ready")
        events = daemon.get("/api/v1/events?kind=recovery&limit=50").json()
        started = [e for e in events if e["message"].startswith("start: autostart")]
        assert started and started[0]["severity"] == "warning", events
        assert "power_brake" in started[0]["message"]
        status = fleetctl(daemon, "status", "--json")
        assert status.returncode == 2
        assert json.loads(status.stdout)["overall"] == "critical"
        assert fleetctl(daemon, "stop").returncode == 0
        again = fleetctl(daemon, "start")
        assert again.returncode == 0, again.stderr
        assert "warning: power_brake" in again.stderr
    finally:
        stop_all([daemon])


def test_an_unknown_gate_check_is_a_config_error_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text('[recovery]\ngate_checks = ["nvml", "vram_unlokced"]\n')
    result = run_fleetd(
        "--simulate", "healthy", "--state-dir", str(tmp_path / "s"), "--config", str(config)
    )
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "recovery.gate_checks: unknown check id 'vram_unlokced'" in line
    assert str(config) in line
