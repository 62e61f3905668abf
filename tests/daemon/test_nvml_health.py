"""A real fleetd on a sick driver: slow NVML reads and NVML going away and coming back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until

BUILTIN = Path(__file__).resolve().parents[2] / "hwcheck" / "sim" / "scenarios"


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
