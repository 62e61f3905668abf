"""A card's passport end to end: a real fleetd under two scenario files, a real fleetctl.

The same two cards (their UUIDs and serials pinned) change slots between two fleetd runs
on one state dir: the passport follows the card, with its diagnostics, its Xid and its
out-of-service mark; a benched card's findings are shown, not paged nor critical; the
export writes JSON and HTML with no host name.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until

pytestmark = pytest.mark.slow(seconds=5)

RIG = """
description = "two cards with pinned identities"
[rig]
name = "NVIDIA CMP 170HX"
pci_device_id = 0x20c2
vbios_version = "92.00.6D.00.0A"
driver_version = "580.95.05"
memory_total_mib = 65536
memory_used_mib = 0
power_draw_w = 58.0
power_limit_w = 180.0
power_enforced_limit_w = 180.0
power_default_limit_w = 250.0
power_min_limit_w = 100.0
power_max_limit_w = 300.0
clock_event_reasons = 0x1
sm_clock_mhz = 1410
memory_clock_mhz = 1215
pcie_gen_current = 2
pcie_width_current = 4
pcie_gen_max = 2
pcie_width_max = 4
persistence_mode = true
fan_speed_pct = "n/a"
recovery_action = 0
temperature_c = 50.0
memory_temperature_c = 55.0
"""
ALPHA = 'uuid = "GPU-aaaaaaaa-0000-4000-8000-000000000001"\nserial = "1650121000001"\n'
BRAVO = 'uuid = "GPU-bbbbbbbb-0000-4000-8000-000000000002"\nserial = "1650121000002"\n'


def scenario(tmp: Path, name: str, first: str, second: str) -> Path:
    path = tmp / f"{name}.toml"
    path.write_text(
        RIG
        + f'\n[[cards]]\npci_bus_id = "0000:01:00.0"\n{first}'
        + f'\n[[cards]]\npci_bus_id = "0000:21:00.0"\n{second}'
    )
    return path


def fleetctl(daemon: Fleetd, *args: str) -> Any:
    return run_fleetctl_here("--url", daemon.url, *args, env={"FLEETCTL_TOKEN": daemon.token})


def passport(daemon: Fleetd, name: str) -> dict[str, Any]:
    done = fleetctl(daemon, "card", name, "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("passport")
    config = tmp / "fleet.toml"
    config.write_text("[rig]\ncard_count = 2\n[serving]\nautostart = false\n")
    return tmp, config


def test_the_passport_follows_the_card_across_a_slot_move(rig: tuple[Path, Path]) -> None:
    tmp, config = rig
    state = tmp / "state"
    first = start_fleetd(tmp, state, simulate=str(scenario(tmp, "a", ALPHA, BRAVO)), config=config)
    try:
        fresh = passport(first, "1650121000001")
        assert fresh["first_time"] is True and fresh["now"]["index"] == 0
        assert fresh["now"]["vbios_version"] == "92.00.6D.00.0A"
        assert fresh["now"]["unlock"] == "unlocked"
        human = fleetctl(first, "card", "0")
        assert "first seen on this rig now" in human.stdout
        ran = fleetctl(first, "diag", "compute", "--card", "0")
        assert ran.returncode == 0, ran.stdout + ran.stderr
        xid = first.post("/api/v1/sim/xid", {"card": 0, "xid": 79})
        assert xid.status_code == 200, xid.text
        wait_until(lambda: passport(first, "0")["xids"], 20, "the Xid in the passport")

        benched = fleetctl(first, "card", "0", "--out-of-service", "RMA: falls off the bus")
        assert benched.returncode == 0, benched.stderr
        assert "out of service: RMA: falls off the bus" in benched.stdout

        def card0_checks() -> list[dict[str, Any]]:
            checks = first.get("/api/v1/status").json()["checks"]
            return [c for c in checks if c["card"] == 0 and c["id"] == "xid_since_boot"]

        wait_until(lambda: card0_checks() and card0_checks()[0]["severity"] == "ok", 20, "benched")
        assert card0_checks()[0]["message"].startswith("out of service (RMA: falls off the bus)")
        bad = fleetctl(first, "card", "0", "--out-of-service", "   ")
        assert bad.returncode == 2 and "needs a reason" in bad.stderr
    finally:
        stop_all([first])

    moved = start_fleetd(tmp, state, simulate=str(scenario(tmp, "b", BRAVO, ALPHA)), config=config)
    try:
        after = passport(moved, "1650121000001")
        assert after["now"]["index"] == 1 and after["now"]["pci_bus_id"] == "0000:21:00.0"
        assert after["first_time"] is False
        assert [s["pci_bus_id"] for s in after["slots"]] == ["0000:01:00.0", "0000:21:00.0"]
        assert [d["kind"] for d in after["diags"]] == ["compute"]
        assert [x["xid"] for x in after["xids"]] == [79]
        assert after["out_of_service"]["reason"] == "RMA: falls off the bus"
        other = passport(moved, "1650121000002")
        assert other["diags"] == [] and other["xids"] == []

        target = tmp / "out" / "alpha.json"
        target.parent.mkdir()
        exported = fleetctl(moved, "card", "export", "1650121000001", "--output", str(target))
        assert exported.returncode == 0, exported.stderr
        page = target.with_suffix(".html").read_text()
        assert "1650121000001" in page and "Slots" in page
        assert socket.gethostname() not in target.read_text() + page
        unknown = fleetctl(moved, "card", "9999999")
        assert unknown.returncode == 2 and "no card '9999999'" in unknown.stderr
    finally:
        stop_all([moved])
