"""The Xid path of a real fleetd: boot log on the first start, and one severity rule."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until

SCENARIOS = Path(__file__).resolve().parents[2] / "hwcheck" / "sim" / "scenarios"
BOOT_XID = (
    "NVRM: Xid (PCI:0000:21:00): 31, pid=13641, name=python3, Ch 00000008, "
    "intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_10 faulted @ 0x7fd7_90743000"
)


@pytest.fixture
def daemons() -> Iterator[list[Fleetd]]:
    started: list[Fleetd] = []
    yield started
    stop_all(started)


def xid_events(daemon: Fleetd) -> list[dict[str, object]]:
    return list(daemon.get("/api/v1/events?kind=xid&limit=1000").json())


def checks_of(daemon: Fleetd, check_id: str) -> list[dict[str, object]]:
    return [c for c in daemon.get("/api/v1/status").json()["checks"] if c["id"] == check_id]


def test_first_start_records_the_boot_logs_xid_and_does_not_autostart(
    tmp_path: Path, daemons: list[Fleetd]
) -> None:
    healthy = (SCENARIOS / "healthy.toml").read_text()
    assert "boot_log = [" in healthy, "the healthy scenario changed shape"
    scenario = tmp_path / "boot-xid31.toml"
    scenario.write_text(healthy.replace("boot_log = [", f'boot_log = [\n    "{BOOT_XID}",', 1))
    daemon = start_fleetd(tmp_path, tmp_path / "state", simulate=str(scenario))
    daemons.append(daemon)
    # Recorded before READY=1: the first status already counts it.
    events = xid_events(daemon)
    assert [(e["card"], e["xid"], e["severity"]) for e in events] == [(1, 31, "critical")]
    status = daemon.get("/api/v1/status").json()
    assert status["overall"] == "critical"
    assert status["serving"]["state"] not in {"starting", "ready"}
    assert "xid_since_boot is critical" in daemon.log()


def test_event_severity_is_the_checks_severity(tmp_path: Path, daemons: list[Fleetd]) -> None:
    config = tmp_path / "fleet.toml"
    # Xid 13 is application-class; a person classes it as needing a reboot on this rig.
    config.write_text('[xid.13]\naction = "reboot"\n')
    daemon = start_fleetd(tmp_path, tmp_path / "state", config=config)
    daemons.append(daemon)
    for card, xid in ((1, 13), (2, 38), (3, 43)):
        assert daemon.post("/api/v1/sim/xid", {"card": card, "xid": xid}).status_code == 200
    wait_until(lambda: len(xid_events(daemon)) == 3, 10, "three Xid events")
    by_card = {e["card"]: e["severity"] for e in xid_events(daemon)}
    wait_until(
        lambda: all(c["severity"] != "ok" for c in checks_of(daemon, "xid_since_boot")[1:4]),
        10,
        "the xid checks judged",
    )
    checks = {c["card"]: c["severity"] for c in checks_of(daemon, "xid_since_boot")}
    assert by_card == {1: "critical", 2: "critical", 3: "warning"}
    assert {card: checks[card] for card in (1, 2, 3)} == by_card
