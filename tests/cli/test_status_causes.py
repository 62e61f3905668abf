"""``status`` and ``top`` at 80x24 on board-level faults: the verdict, the root cause and
its advice on the first screen, one line per cause, the failing check's tag on each card.

The documents are real: ``fleetctl check --simulate S --json`` through the real checks
(the same card and cause blocks as the daemon's status document), drawn by the views that
``status`` and ``top`` draw a terminal with.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import cache
from typing import Any

import pytest

from daemon.cli.rig.status import status_lines
from daemon.cli.views.rigview import Screen
from daemon.cli.views.screen import plain
from daemon.cli.views.topview import ViewSource, rig_view
from tests.support.cli import run_fleetctl_here

NOW = datetime(2026, 12, 4, 3, 0, tzinfo=UTC)


@cache
def checked(scenario: str) -> dict[str, Any]:
    shown = run_fleetctl_here("check", "--simulate", scenario, "--no-probe", "--json")
    assert shown.returncode == 2, shown.stderr
    doc: dict[str, Any] = json.loads(shown.stdout)
    return doc


def screen_of(lines: list[str], rows: int = 24) -> str:
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    return "\n".join(lines[:rows])


def test_stock_kernel_shows_the_root_cause_and_its_advice_first() -> None:
    doc = checked("stock-kernel")
    first = screen_of(plain(status_lines(doc, Screen(80))).splitlines())
    lines = first.splitlines()

    assert lines[0] == "overall: CRITICAL"
    assert lines[1].startswith("critical host_kernel: running kernel 6.8.0-49-generic")
    assert "fix: reboot into 6.8.12-cmp-bar1" in first  # the root cause's advice
    assert "critical bar1 cards 0-3: BAR1 256 MiB" in first  # once, for every card
    assert "(follows from host_kernel)" in first
    assert first.count("bar1 card") == 1 and first.count("p2p card") == 1
    assert first.index("host_kernel") < first.index("bar1") < first.index("card  state")
    assert "p2p cards 0-3" in first  # the warning, after the cards, still on screen
    for row in range(4):
        assert any(line.split()[:2] == [f"{row}", "BAR1"] for line in lines)


def test_power_brake_says_brake_on_every_card_row_and_the_fix_once() -> None:
    doc = checked("power-brake")
    lines = plain(status_lines(doc, Screen(80))).splitlines()
    first = screen_of(lines)

    assert first.count("power_brake") == 1
    assert "power_brake cards 0-3: HW power brake active" in first
    # The advice names where an all-card brake comes from first (the board, the supply),
    # then the tape; once, on the first screen.
    assert first.count("fix: every card is braked at once") == 1
    assert "Kapton tape over PCIe pin B30" in first
    rows = [line.split() for line in lines if line[:4].strip() in {"0", "1", "2", "3"}]
    assert [row[1] for row in rows] == ["BRAKE"] * 4


@pytest.mark.parametrize("scenario", ["stock-kernel", "power-brake", "locked-vram"])
def test_top_at_80x24_keeps_verdict_cause_advice_and_every_card(scenario: str) -> None:
    doc = checked(scenario)
    source = ViewSource("http://rig:8170")
    lines = plain(rig_view(doc, source, NOW, Screen(80, 24))).splitlines()

    assert len(lines) <= 24
    assert lines[0].startswith("CRITICAL  cmpfleet top")
    assert lines[1].startswith("critical ")
    assert any(line.strip().startswith("fix: ") for line in lines[1:6])
    assert sum(1 for line in lines if line.strip().split(" ")[0] in {"0", "1", "2", "3"}) == 4


def test_eight_cards_and_a_latch_still_fit_with_the_cause_first() -> None:
    doc = checked("power-brake")
    card = doc["cards"][0]
    doc["cards"] = [{**card, "index": n, "pci_bus_id": f"0000:{n:02x}:00.0"} for n in range(8)]
    doc["recovery"] = {
        "reboot_required": True,
        "reason": "Xid 79 (GPU has fallen off the bus) on card 5",
        "advice": "reboot the host (fleetctl reboot --confirm)",
    }
    for cause in doc["causes"]:
        cause["cards"] = list(range(8))
        cause["headline"] = cause["headline"].replace("cards 0-3", "cards 0-7")
    lines = plain(rig_view(doc, ViewSource("http://rig:8170"), NOW, Screen(80, 24))).splitlines()

    assert len(lines) <= 24
    assert lines[1].startswith("REBOOT REQUIRED")
    assert any("power_brake cards 0-7" in line for line in lines)
    assert sum(1 for line in lines if line.strip().split(" ")[0] in set("01234567")) == 8


def test_p_shows_each_cards_processes_under_it_and_the_profiles_cards_are_marked() -> None:
    doc = json.loads(json.dumps(checked("power-brake")))
    doc["serving"] = {"state": "ready", "pid": 4242, "restarts": 0, "profile": "dsv4",
                      "cards": [0, 1, 2, 3]}  # fmt: skip
    for card in doc["cards"]:
        card["in_profile"] = True
        card["processes"] = [{"pid": 4242, "name": "VLLM::Worker_PP", "container":
                              "docker 3f2a1b0c9d8e", "used_memory_mib": 55706}]  # fmt: skip
    source = ViewSource("http://rig:8170")
    hidden = plain(rig_view(doc, source, NOW, Screen(120, 40))).splitlines()
    shown = plain(rig_view(doc, source, NOW, Screen(120, 40), processes=True)).splitlines()

    assert not any("VLLM::Worker_PP" in line for line in hidden)
    rows = [n for n, line in enumerate(shown) if line.lstrip().startswith(("0*", "1*"))]
    assert shown[rows[0] + 1].split() == [
        "pid", "4242", "VLLM::Worker_PP", "docker", "3f2a1b0c9d8e", "55,706", "MiB"
    ]  # fmt: skip
    assert "profile dsv4 on cards 0-3 (*)" in "\n".join(shown)


def test_a_refused_start_is_said_on_the_engine_line_instead_of_a_bare_stopped() -> None:
    doc = json.loads(json.dumps(checked("stock-kernel")))
    doc["serving"] = {
        "state": "stopped", "pid": None, "restarts": 0, "reason": "switching to profile b",
        "refusal": {"ts": "2026-12-04T03:00:00+00:00", "trigger": "autostart",
                    "codes": ["critical_check"], "message": "host_kernel: running kernel ..."},
    }  # fmt: skip
    text = plain(status_lines(doc, Screen(80)))

    # Its reasons are the causes the status shows with their fixes: named, not repeated.
    assert "last start refused (critical_check): by the causes shown here" in text
    assert text.count("host_kernel: running kernel") == 1
    assert "why: switching to profile b" not in text  # the refusal says why it is down now
    # A reason the status shows nowhere else is said, without its fix.
    doc["serving"]["refusal"] = {
        "ts": "2026-12-04T03:00:00+00:00", "trigger": "autostart", "codes": ["port_in_use"],
        "message": "port 8000 is held by nginx (pid 7); fix: stop it",
        "headline": "port 8000 is held by nginx (pid 7)",
    }  # fmt: skip
    text = plain(status_lines(doc, Screen(80)))
    assert "last start refused (port_in_use): port 8000 is held by nginx (pid 7)" in text
    assert "fix: stop it" not in text
