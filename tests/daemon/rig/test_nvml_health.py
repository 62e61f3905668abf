"""A real fleetd on a sick driver: slow NVML reads and NVML going away and coming back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import run_fleetctl_here as fleetctl
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until

BUILTIN = Path(__file__).resolve().parents[3] / "hwcheck" / "sim" / "scenarios"


@pytest.fixture
def daemons() -> Iterator[list[Fleetd]]:
    started: list[Fleetd] = []
    yield started
    stop_all(started)


def _scenario_with_host(tmp_path: Path, name: str, host_lines: str) -> Path:
    """The healthy scenario with extra ``[host]`` keys (its last table is ``[host]``)."""
    text = (BUILTIN / "healthy.toml").read_text()
    headers = [line for line in text.splitlines() if line.startswith("[")]
    assert headers[-1] == "[host]", "the keys below must land in the [host] table"
    path = tmp_path / f"{name}.toml"
    path.write_text(text + "\n" + host_lines + "\n")
    return path


def _no_engine(tmp_path: Path) -> Path:
    config = tmp_path / "fleet.toml"
    config.write_text("[serving]\nautostart = false\n")
    return config


def test_a_driver_slower_than_the_nvml_timeout_marks_the_cards_lost(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    scenario = _scenario_with_host(tmp_path, "stuck", "nvml_delay_s = 1.5")
    daemon = start_fleetd(
        tmp_path,
        tmp_path / "state",
        simulate=str(scenario),
        config=_no_engine(tmp_path),
        env={"CMPFLEET_POLL_NVML_TIMEOUT_S": "0.3"},
        ready_timeout_s=60,
    )
    daemons.append(daemon)
    doc = daemon.get("/api/v1/status").json()
    assert [card["state"] for card in doc["cards"]] == ["lost"] * 4
    assert doc["overall"] == "critical"
    lost = [c for c in doc["checks"] if c["id"] == "card_lost"]
    assert all(c["severity"] == "critical" for c in lost)
    assert "timed out after 0.3 s" in lost[0]["message"]
    wait_until(lambda: "card_lost" in daemon.log(), 10, "the lost-card transition in the log")


def test_nvml_down_is_one_log_line_a_reason_and_a_remedy_until_it_answers_again(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    """After a driver upgrade without a reboot NVML refuses to start: say so once, and why."""
    back_after_s = 12.0
    scenario = _scenario_with_host(
        tmp_path,
        "mismatch",
        f'nvml_unavailable = "lib_rm_version_mismatch"\nnvml_back_after_s = {back_after_s}',
    )
    daemon = start_fleetd(
        tmp_path, tmp_path / "state", simulate=str(scenario), config=_no_engine(tmp_path)
    )
    daemons.append(daemon)
    doc = daemon.get("/api/v1/status").json()
    assert doc["overall"] == "critical", doc
    (nvml,) = doc["checks"]
    assert nvml["id"] == "nvml"
    assert nvml["severity"] == "critical"
    assert nvml["message"].startswith("NVIDIA driver/library version mismatch")
    assert "reboot the host" in nvml["remedy"]
    assert doc["rig"]["nvml_error"] == nvml["message"]

    human = fleetctl("--url", daemon.url, "status")
    assert human.returncode == 2, human.stdout + human.stderr
    assert "NVIDIA driver/library version mismatch" in human.stdout
    assert "reboot the host to load the new kernel module" in human.stdout
    assert "overall: CRITICAL" in human.stdout

    def answers() -> bool:
        return bool(daemon.get("/api/v1/status").json()["overall"] == "ok")

    wait_until(answers, back_after_s + 20, "NVML answering again")
    checks = {c["id"]: c for c in daemon.get("/api/v1/status").json()["checks"]}
    assert checks["nvml"]["severity"] == "ok"
    wait_until(lambda: "NVML answers again" in daemon.log(), 10, "the recovery log line")
    log = daemon.log()
    # Several polls failed while NVML was down, yet one line said so, and one that it is back.
    assert daemon.get("/api/v1/status").json()["rig"]["polls"] >= 1
    assert sum("NVML unavailable:" in line for line in log.splitlines()) == 1, log
    assert sum("NVML answers again" in line for line in log.splitlines()) == 1, log
    assert "Traceback" not in log


def test_fleetctl_check_says_why_nvml_is_down_and_what_to_do(tmp_path: Path) -> None:
    scenario = _scenario_with_host(tmp_path, "unloaded", 'nvml_unavailable = "driver_not_loaded"')
    result = fleetctl("check", "--simulate", str(scenario))
    assert result.returncode == 3
    (line,) = result.stderr.strip().splitlines()
    assert "NVIDIA driver not loaded" in line
    assert "sudo modprobe nvidia" in line
