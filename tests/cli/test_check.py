"""``fleetctl check --simulate`` for every built-in scenario, as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hwcheck.sim.scenario import builtin_scenario_names
from tests.support.cli import run_fleetctl
from tests.support.cli import run_fleetctl_here as fleetctl
from tests.support.contract import CONTRACT_CARD_KEYS, CONTRACT_CHECK_IDS

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=65)

EXPECTED_EXIT = {
    "healthy": 0,
    "healthy-8": 0,
    "locked-vram": 2,
    "power-brake": 2,
    "uncapped": 1,
    "xid31": 0,  # the Xid fires ~20 s after the simulated boot; a 2-s check sees a healthy rig
    "xid31-8": 0,  # the same on eight cards (card 6), for the two-engine example
    "engine-corrupt": 0,
    "serving-persistenced": 0,  # persistenced and fleetd hold /dev/nvidia*: never foreign
    "cuda-wedge": 2,  # NVML sees healthy cards: the CUDA probe finds the wedge
    "stock-kernel": 2,  # host_kernel and bar1 critical, p2p a warning (no tensor parallel)
    "boot-drift": 1,  # host_kernel: the next reboot boots another kernel
    "riser-errors": 1,  # pcie_errors on card 2
    "bad-hbm": 0,  # only the memory test (engine stopped, through fleetd) finds it
    "bad-sm": 0,  # only diag compute (through fleetd) finds it
    "hot-card": 0,  # warm at idle; the thermal stop trips only under a sustained diag
    "slow-link": 0,  # an idle link may read low: diag pcie measures it under load
    "depth-crash": 0,  # healthy cards: the engine crashes past 134k tokens (a black box)
    "kv-drift": 0,  # healthy until a reboot: card 2 then reports less memory (the KV pool drops)
    "rank-repeat": 0,  # healthy cards: the engine faults on one rank now and then
    "deep-decay": 0,  # healthy cards: only the engine's deep canaries find it
    "spec-collapse": 0,  # healthy cards: only the engine's own metrics show it
    "truncated-shard": 0,  # healthy cards: the start's preflight refuses the short shard
}


def test_every_builtin_scenario_has_an_expected_exit_code() -> None:
    assert set(builtin_scenario_names()) == set(EXPECTED_EXIT)


@pytest.mark.parametrize("scenario", sorted(EXPECTED_EXIT))
def test_check_exit_code_and_json(scenario: str) -> None:
    result = fleetctl("check", "--simulate", scenario, "--json")
    assert result.returncode == EXPECTED_EXIT[scenario], result.stderr
    doc = json.loads(result.stdout)
    assert doc["overall"] == ["ok", "warning", "critical"][EXPECTED_EXIT[scenario]]
    assert {c["id"] for c in doc["checks"]} >= CONTRACT_CHECK_IDS
    for card in doc["cards"]:
        assert set(card) >= CONTRACT_CARD_KEYS
    if scenario == "healthy":
        assert all(c["severity"] == "ok" for c in doc["checks"]), doc["checks"]
        assert len(doc["cards"]) == 4


@pytest.mark.parametrize("scenario", ["healthy", "uncapped", "locked-vram"])
def test_the_real_process_exits_with_the_worst_severity(scenario: str) -> None:
    """The tests above run fleetctl's ``main`` in this process; the exit status a monitor
    reads from the real process is the same code (0 ok, 1 warning, 2 critical)."""
    result = run_fleetctl("check", "--simulate", scenario, "--json")
    assert result.returncode == EXPECTED_EXIT[scenario], result.stderr
    assert json.loads(result.stdout)["overall"] == ["ok", "warning", "critical"][result.returncode]


def test_the_cuda_probe_finds_the_wedge_nvml_cannot_see() -> None:
    doc = json.loads(fleetctl("--json", "check", "--simulate", "cuda-wedge").stdout)
    probe = {c["card"]: c for c in doc["checks"] if c["id"] == "cuda_probe"}
    assert sorted(probe) == [0, 1, 2, 3]
    assert probe[1]["severity"] == "critical"
    assert "CUDA_ERROR_DEVICE_UNAVAILABLE" in probe[1]["message"]
    assert "reboot" in probe[1]["remedy"]
    assert {probe[card]["severity"] for card in (0, 2, 3)} == {"ok"}
    skipped = fleetctl("check", "--simulate", "cuda-wedge", "--no-probe")
    assert skipped.returncode == 0, skipped.stdout
    assert "cuda_probe" not in skipped.stdout


def test_locked_card_is_named_with_a_concrete_remedy() -> None:
    doc = json.loads(fleetctl("--json", "check", "--simulate", "locked-vram").stdout)
    bad = [c for c in doc["checks"] if c["severity"] == "critical"]
    assert [(c["id"], c["card"]) for c in bad] == [("vram_unlocked", 2)]
    assert "8192" in bad[0]["message"].replace(",", "")
    assert bad[0]["remedy"]
    assert doc["cards"][2]["memory_total_mib"] == 8192


def test_human_output_is_not_cut_in_a_pipe() -> None:
    result = fleetctl("check", "--simulate", "power-brake")
    assert result.returncode == 2
    assert "Kapton tape over PCIe pin B30" in result.stdout
    assert "overall: CRITICAL" in result.stdout


def test_bad_scenario_and_bad_config_are_one_line_unknown(tmp_path: Path) -> None:
    missing = fleetctl("check", "--simulate", "no-such-scenario")
    assert missing.returncode == 3
    assert missing.stdout == ""
    as_json = fleetctl("check", "--simulate", "no-such-scenario", "--json")
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout)["overall"] == "unknown"
    assert len(missing.stderr.strip().splitlines()) == 1
    assert "no-such-scenario" in missing.stderr
    config = tmp_path / "fleet.toml"
    config.write_text("[rig]\npower_cap = 180\n")
    bad = fleetctl("check", "--simulate", "healthy", "--config", str(config))
    assert bad.returncode == 3
    assert (
        bad.stderr.strip()
        == f"fleetctl: {config}: unknown key 'rig.power_cap' (did you mean 'power_cap_w'?)"
    )


def test_config_profile_changes_the_verdict(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text("[rig]\npower_cap_w = 250\ncard_count = 4\n")
    assert fleetctl("check", "--simulate", "uncapped", "--config", str(config)).returncode == 0
    config.write_text("[rig]\ncard_count = 5\n")
    result = fleetctl("check", "--simulate", "healthy", "--config", str(config), "--json")
    assert result.returncode == 2
    bad = [c for c in json.loads(result.stdout)["checks"] if c["severity"] != "ok"]
    assert [c["id"] for c in bad] == ["card_count"]
