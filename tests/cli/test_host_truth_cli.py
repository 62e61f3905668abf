"""Issue 18 as a user meets it: ``fleetctl check`` on the host-truth scenarios, and
``fleetctl init`` recording the host baseline that ``init --show`` prints back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from daemon.config import load_settings
from tests.support.cli import run_fleetctl_here as fleetctl
from tests.support.contract import CONTRACT_HOST_CHECK_IDS

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=10)

HOST_CHECKS = CONTRACT_HOST_CHECK_IDS


def check(scenario: str, *args: str) -> tuple[int, dict[str, Any]]:
    result = fleetctl("check", "--simulate", scenario, "--json", *args)
    return result.returncode, json.loads(result.stdout)


def severities(doc: dict[str, Any], check_id: str) -> dict[int | None, str]:
    return {c["card"]: c["severity"] for c in doc["checks"] if c["id"] == check_id}


def test_healthy_has_every_host_check_and_all_ok() -> None:
    code, doc = check("healthy")

    assert code == 0
    assert {c["id"] for c in doc["checks"]} >= HOST_CHECKS
    assert {c["severity"] for c in doc["checks"] if c["id"] in HOST_CHECKS} == {"ok"}
    assert doc["host"]["facts"]["running_kernel"] == doc["host"]["baseline"]["kernel_release"]


def test_stock_kernel_is_critical_for_the_kernel_and_bar1_and_p2p_is_not_ok() -> None:
    code, doc = check("stock-kernel")

    assert code == 2
    assert severities(doc, "host_kernel") == {None: "critical"}
    assert set(severities(doc, "bar1").values()) == {"critical"}
    assert set(severities(doc, "p2p").values()) == {"warning"}  # no tensor parallel here
    bar1 = next(c for c in doc["checks"] if c["id"] == "bar1")
    assert "the 64 GB BAR1 is gone" in bar1["message"]
    assert bar1["remedy"]


def test_p2p_is_critical_when_the_recipe_runs_tensor_parallel(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text(
        '[serving.recipe]\npreset = "dsv4-flash-pp4-dspark"\nmodel = "/models/m"\n'
        'extra_args = ["--tensor-parallel-size", "2"]\n'
    )

    code, doc = check("stock-kernel", "--config", str(config))

    assert code == 2
    assert set(severities(doc, "p2p").values()) == {"critical"}
    assert doc["host"]["tensor_parallel_size"] == 2


def test_boot_drift_warns_naming_the_next_boot_kernel() -> None:
    code, doc = check("boot-drift")

    assert code == 1
    (kernel,) = [c for c in doc["checks"] if c["id"] == "host_kernel"]
    assert kernel["severity"] == "warning"
    assert "the next reboot boots 6.8.0-49-generic" in kernel["message"]
    assert "6.8.12-cmp-bar1" in kernel["remedy"]


def test_riser_errors_warn_on_card_2() -> None:
    code, doc = check("riser-errors")

    assert code == 1
    assert severities(doc, "pcie_errors") == {0: "ok", 1: "ok", 2: "warning", 3: "ok"}
    assert doc["cards"][2]["pcie_replay_count"] > 0


def test_a_pin_in_the_config_wins_over_the_simulated_baseline(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text('[host]\nkernel_release = "6.8.0-49-generic"\n')

    code, doc = check("stock-kernel", "--config", str(config))

    assert severities(doc, "host_kernel") == {None: "ok"}
    assert code == 2  # BAR1 is still below the recorded 64 GiB


def test_init_records_the_host_baseline_and_show_prints_it(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    written = fleetctl("init", "--simulate", "riser-errors", "--output", str(config))
    assert written.returncode == 0, written.stderr
    assert '+[host.cards."0000:41:00.0"]' in written.stdout  # in the diff init shows
    again = fleetctl("init", "--simulate", "riser-errors", "--output", str(config), "--force")
    assert "already records this baseline" in again.stdout  # when is a comment, not a change

    host = load_settings(config, environ={}).host
    assert host.kernel_release == "6.8.12-cmp-bar1"
    assert host.module_srcversion
    assert host.required_cmdline is not None
    assert "iommu=pt" in host.required_cmdline
    assert len(host.cards) == 4
    assert host.card("0000:41:00.0").p2p_ok == ("0000:01:00.0", "0000:21:00.0", "0000:61:00.0")
    shown = fleetctl("init", "--show", "--simulate", "stock-kernel", "--config", str(config))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(
        "# host baseline: the simulated rig's own baseline with the config's [host] keys"
    )
    assert 'kernel_release = "6.8.12-cmp-bar1"' in shown.stdout
    as_json = json.loads(fleetctl("init", "--show", "--simulate", "stock-kernel", "--json").stdout)
    assert as_json["baseline"]["kernel_release"] == "6.8.12-cmp-bar1"
    assert as_json["facts"]["running_kernel"] == "6.8.0-49-generic"


def test_init_on_a_host_without_the_64gb_bar1_warns_in_the_config(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    assert fleetctl("init", "--simulate", "stock-kernel", "--output", str(config)).returncode == 0

    text = config.read_text()
    assert text.count("bar1_mib = 256  # WARNING: no 64 GB BAR1 here") == 4
    assert load_settings(config, environ={}).host.card("0000:01:00.0").bar1_mib == 256


def test_init_show_with_a_bad_config_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text("[host]\nkernal_release = 'x'\n")

    result = fleetctl("init", "--show", "--simulate", "healthy", "--config", str(config))

    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"fleetctl: {config}: unknown key 'host.kernal_release' (did you mean 'kernel_release'?)"
    ]
