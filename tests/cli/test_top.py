"""``fleetctl top``: one frame when piped, a live view in a real terminal (a pty) that
survives its daemon restarting and quits on ``q``; and what one rig's frame shows."""

from __future__ import annotations

import copy
import io
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from rich.console import Console

from daemon.cli.topview import ViewSource, rig_view
from tests.support.cli import run_fleetctl
from tests.support.fleetd import Fleetd, free_port, start_fleetd, stop_all
from tests.support.terminal import read_until, spawn_in_pty
from tests.web.documents import DOCUMENTS

PCI_IDS = ["0000:01:00.0", "0000:21:00.0", "0000:41:00.0", "0000:61:00.0"]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A simulated fleetd without an engine (quick to start, and to restart)."""
    tmp = tmp_path_factory.mktemp("top")
    config = tmp / "fleet.toml"
    config.write_text("[serving]\nautostart = false\n")
    held: dict[str, Any] = {"tmp": tmp, "config": config, "port": free_port()}
    held["daemon"] = start_fleetd(tmp, tmp / "state", config=config, port=held["port"])
    try:
        yield held
    finally:
        stop_all([held["daemon"]])


def test_piped_it_prints_one_frame_with_every_card(rig: dict[str, Any]) -> None:
    daemon: Fleetd = rig["daemon"]
    shown = run_fleetctl("--url", daemon.url, "top")
    assert shown.returncode == 0, shown.stderr
    for pci in PCI_IDS:
        assert pci in shown.stdout
    assert shown.stdout.count("unlocked 65,536 MiB") == 4
    assert "180 W" in shown.stdout and "Gen2 x4" in shown.stdout
    assert "engine STOPPED" in shown.stdout
    assert "checks: all" in shown.stdout
    assert "canaries: copy_fidelity skipped  tool_calls skipped" in shown.stdout  # no engine
    assert f"fleetd pid {daemon.proc.pid}" in shown.stdout
    assert "\x1b[" not in shown.stdout  # no cursor moves or colours into a pipe


def test_piped_with_no_daemon_it_says_so_and_exits_unknown() -> None:
    shown = run_fleetctl("--url", f"http://127.0.0.1:{free_port()}", "top")
    assert shown.returncode == 3
    assert shown.stdout == ""
    assert shown.stderr.startswith("fleetctl: cannot reach fleetd")


def render(doc: dict[str, Any], source: ViewSource | None = None) -> str:
    console = Console(file=io.StringIO(), width=250, record=True, color_system=None)
    now = datetime(2026, 12, 3, 4, 0, tzinfo=UTC)
    console.print(rig_view(doc, source or ViewSource("http://rig:8170"), now))
    return console.export_text()


def test_a_sick_rig_shows_latch_advice_lock_brake_and_loss() -> None:
    doc = copy.deepcopy(DOCUMENTS["status"])
    doc["overall"] = "critical"
    doc["recovery"] = {
        "reboot_required": True,
        "reason": "Xid 79 on card 1 (GPU fell off the bus)",
        "since": "2026-12-03T03:50:00+00:00",
        "advice": "cold power cycle: shut down, remove power for 30 s",
        "decisions": [
            {"ts": "2026-12-03T03:50:00+00:00", "action": "stop_and_latch",
             "outcome": "done", "reason": "Xid 79", "dry_run": False},
        ],
    }  # fmt: skip
    first = doc["cards"][0]
    doc["cards"] = [{**first, "index": i, "pci_bus_id": pci} for i, pci in enumerate(PCI_IDS)]
    doc["cards"][1].update(state="lost", lost_reason="GPU is lost")
    doc["cards"][2].update(memory_total_mib=8192, state="critical")
    doc["cards"][3].update(power_brake_active=True, state="critical")
    doc["checks"] = [
        {"id": "vram_unlocked", "card": 2, "severity": "critical",
         "message": "card 2: 8,192 MiB", "remedy": "load cmpunlocker and reboot"},
        {"id": "vram_unlocked", "card": 0, "severity": "ok", "message": "ok", "remedy": ""},
    ]  # fmt: skip
    doc["serving"].update(state="stopped", reason="recovery stop", crash_class="hardware")
    text = render(doc)
    assert "REBOOT REQUIRED" in text
    assert "Xid 79 on card 1 (GPU fell off the bus)" in text
    assert "cold power cycle: shut down, remove power for 30 s" in text
    assert "stop_and_latch -> done" in text
    assert "LOST: GPU is lost" in text
    assert "LOCKED 8,192 MiB" in text and "unlocked 65,536 MiB" in text
    assert "ACTIVE" in text
    assert "load cmpunlocker and reboot" in text
    assert "engine STOPPED" in text and "last crash: hardware" in text


def test_the_engine_line_has_uptime_load_and_restarts() -> None:
    text = render(DOCUMENTS["status"])
    assert "engine READY  up 8m06s" in text
    assert "tokens/s 31.5" in text
    assert "running 1" in text
    assert "restarts 0" in text


def test_canaries_are_one_line_with_the_failures_advice_below() -> None:
    doc = copy.deepcopy(DOCUMENTS["status"])
    ran = "2026-12-03T03:55:00+00:00"
    doc["canaries"] = [
        {"name": "copy_fidelity", "result": "fail", "figure": 0.8, "unit": "ratio",
         "advice": "token corruption in the engine build", "ts": ran},
        {"name": "tool_calls", "result": "pass", "figure": 1, "advice": None, "ts": ran},
        {"name": "reasoning_field", "result": "warn", "figure": 120, "unit": "chars",
         "advice": "reasoning only in `reasoning`", "ts": ran},
        {"name": "throughput", "result": "skipped", "figure": None, "advice": "busy", "ts": None},
    ]  # fmt: skip
    doc["log_signatures"] = [
        {"name": "traceback", "this_hour": 2, "last_24h": 3, "last_seen_hour": ran},
        {"name": "out_of_vocab", "this_hour": 0, "last_24h": 1, "last_seen_hour": ran},
    ]
    text = render(doc)
    assert (
        "canaries: copy_fidelity FAIL  tool_calls pass  reasoning_field WARN  throughput skipped"
        in text
    )
    assert "copy_fidelity 80.0% (5m00s ago): token corruption in the engine build" in text
    assert "reasoning_field 120 chars (5m00s ago): reasoning only in `reasoning`" in text
    assert "busy" not in text  # a skipped canary verified nothing: no advice to act on
    assert "engine log this hour: traceback 2" in text
    assert "out_of_vocab" not in text
    assert "canaries:" not in render({**doc, "canaries": None})  # an older daemon


def test_an_unanswered_refresh_keeps_the_picture_under_reconnecting() -> None:
    seen = datetime(2026, 12, 3, 3, 59, 50, tzinfo=UTC)
    text = render(DOCUMENTS["status"], ViewSource("http://rig:8170", "cannot reach fleetd", seen))
    assert "reconnecting: cannot reach fleetd (last answer 0m10s ago)" in text
    assert "0000:01:00.0" in text  # the last picture stays


@pytest.mark.slow
def test_in_a_terminal_it_survives_a_daemon_restart_and_quits_on_q(
    rig: dict[str, Any],
) -> None:
    daemon: Fleetd = rig["daemon"]
    proc, master = spawn_in_pty(
        [sys.executable, "-m", "daemon.fleetctl", "--url", daemon.url, "top", "--interval", "0.3"]
    )
    seen = bytearray()
    try:
        read_until(master, f"fleetd pid {daemon.proc.pid}".encode(), 30, seen=seen)
        read_until(master, b"last poll", 20, seen=seen)  # the footer, drawn below the cards
        assert all(pci.encode() in seen for pci in PCI_IDS)
        assert daemon.stop() == 0
        stop_all([daemon])  # its notify socket
        read_until(master, b"reconnecting: cannot reach fleetd", 10, seen=seen)
        again = start_fleetd(rig["tmp"], daemon.state_dir, config=rig["config"], port=rig["port"])
        rig["daemon"] = again
        read_until(master, f"fleetd pid {again.proc.pid}".encode(), 20, seen=seen)
        os.write(master, b"q")
        assert proc.wait(10) == 0
        read_until(master, b"\x1b[?1049l", 5, seen=seen)  # the alternate screen is left
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
