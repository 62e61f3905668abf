"""``fleetctl fleet top``: one frame when piped, a live view in a terminal that ``q`` ends."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from tests.support.cli import run_fleetctl
from tests.support.fleet_rigs import TwoRigs, write_fleet_file
from tests.support.fleetd import free_port
from tests.support.terminal import read_until, spawn_in_pty
from tests.support.tmux import tmux_screen

PCI = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")


def fleet(two_rigs: TwoRigs, tmp_path: Path) -> tuple[Path, str]:
    gone = f"http://127.0.0.1:{free_port()}"
    path = write_fleet_file(
        tmp_path / "rigs.toml",
        {"alpha": two_rigs.healthy.url, "bravo": two_rigs.xid.url, "gone": gone},
    )
    return path, gone


def test_piped_it_prints_one_line_per_rig_and_exits(two_rigs: TwoRigs, tmp_path: Path) -> None:
    path, gone = fleet(two_rigs, tmp_path)
    result = run_fleetctl("fleet", "top", "--fleet", str(path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("fleet CRITICAL")  # the verdict first
    assert lines[1].split()[:2] == ["rig", "overall"]  # plain columns, no box drawing
    rows = {line.split()[0]: line for line in lines[2:]}
    assert set(rows) == {"alpha", "bravo", "gone"}
    assert " ok " in rows["alpha"] and " 4/4 " in rows["alpha"]
    assert " critical " in rows["bravo"] and " 3/4 " in rows["bravo"]
    assert f"cannot reach fleetd at {gone}" in rows["gone"]


def test_cards_gives_one_line_per_card(two_rigs: TwoRigs, tmp_path: Path) -> None:
    path, gone = fleet(two_rigs, tmp_path)
    result = run_fleetctl("fleet", "top", "--cards", "--fleet", str(path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].split()[:3] == ["rig", "card", "state"]  # plain columns, no box drawing
    rows = [line.split() for line in lines[2:]]
    cards = {
        (row[0], row[1].rstrip("*"), next(word for word in row if PCI.fullmatch(word)))
        for row in rows
        if row[0] in ("alpha", "bravo")
    }
    pci = [card["pci_bus_id"] for card in two_rigs.healthy.get("/api/v1/status").json()["cards"]]
    assert cards == {(rig, str(i), bus) for rig in ("alpha", "bravo") for i, bus in enumerate(pci)}
    gone_rows = [" ".join(row) for row in rows if row[0] == "gone"]
    assert len(gone_rows) == 1 and f"unknown: cannot reach fleetd at {gone}" in gone_rows[0]


def test_in_a_terminal_it_refreshes_until_q(two_rigs: TwoRigs, tmp_path: Path) -> None:
    path, _ = fleet(two_rigs, tmp_path)
    argv = [sys.executable, "-m", "daemon.fleetctl", "fleet", "top", "--fleet", str(path)]
    proc, master = spawn_in_pty([*argv, "--interval", "0.3", "--timeout", "1"], rows=40, cols=200)
    try:
        drawn = read_until(master, b"cmpfleet fleet top", 30, count=3)  # it redraws
        assert b"alpha" in drawn and b"bravo" in drawn
        os.write(master, b"q")
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def test_at_80x24_every_rig_is_one_whole_line(two_rigs: TwoRigs, tmp_path: Path) -> None:
    path, _ = fleet(two_rigs, tmp_path)
    argv = [sys.executable, "-m", "daemon.fleetctl", "fleet", "top", "--fleet", str(path)]
    with tmux_screen([*argv, "--interval", "0.5", "--timeout", "1"], 80, 24) as screen:
        shown = screen.wait_for("gone ")
        screen.keys("q")
    rows = {line.split()[0]: line for line in shown[2:] if line.strip()}
    assert set(rows) == {"alpha", "bravo", "gone"}, shown
    assert " critical " in rows["bravo"] and " ok " in rows["alpha"]
    assert all(len(line) <= 80 for line in shown)
    assert "crit" not in rows["bravo"].replace("critical", "")  # never "crit/ical"
