"""``fleetctl top``: one frame when piped, a live view in a real terminal (a pty) that
survives its daemon restarting and quits on ``q``; and what one rig's frame shows."""

from __future__ import annotations

import copy
import os
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from daemon.cli.views.rigview import Screen, pinned_text
from daemon.cli.views.screen import plain
from daemon.cli.views.topview import ViewSource, rig_view
from tests.support.cli import run_fleetctl
from tests.support.documents import DOCUMENTS
from tests.support.fleetd import Fleetd, free_port, start_fleetd, stop_all, wait_until
from tests.support.scenarios import sooner
from tests.support.terminal import read_to_end, read_until, spawn_in_pty
from tests.support.tmux import tmux_screen

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
    assert "engine: stopped" in shown.stdout
    assert "checks: all" in shown.stdout
    assert "canaries:  copy_fidelity skipped  tool_calls skipped" in shown.stdout  # no engine
    assert f"fleetd pid {daemon.proc.pid}" in shown.stdout
    assert "\x1b[" not in shown.stdout  # no cursor moves or colours into a pipe
    assert not set(shown.stdout) & set("━─│┃╇┡")  # no box drawing into a pipe
    assert all(line == line.rstrip() for line in shown.stdout.splitlines())


def test_piped_with_no_daemon_it_says_so_and_exits_unknown() -> None:
    shown = run_fleetctl("--url", f"http://127.0.0.1:{free_port()}", "top")
    assert shown.returncode == 3
    assert shown.stdout == ""
    assert shown.stderr.startswith("fleetctl: cannot reach fleetd")


def render(doc: dict[str, Any], source: ViewSource | None = None, width: int = 250) -> str:
    now = datetime(2026, 12, 3, 4, 0, tzinfo=UTC)
    return plain(rig_view(doc, source or ViewSource("http://rig:8170"), now, Screen(width)))


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
    assert "LOST" in text
    assert "LOCKED 8,192 MiB" in text and "unlocked 65,536 MiB" in text
    assert "ACTIVE" in text
    assert "fix: load cmpunlocker and reboot" in text
    assert "engine: stopped" in text and "last crash: hardware" in text
    lines = text.splitlines()
    assert lines[0].startswith("CRITICAL  cmpfleet top")  # the verdict leads
    assert lines[1].startswith("REBOOT REQUIRED since ")  # the latch before the cards
    assert lines.index(next(line for line in lines if line.startswith("card "))) > 2


def test_the_engine_line_has_uptime_load_and_restarts() -> None:
    text = render(DOCUMENTS["status"])
    assert "engine: ready (pid " in text and "), restarts 0, up 8m06s" in text
    assert "tokens/s 31.5, running 1, waiting" in text


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
        "canaries:  copy_fidelity FAIL  tool_calls pass  reasoning_field WARN  throughput skipped"
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


@pytest.mark.slow(seconds=10)
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


# -- the views fit the terminal they get ------------------------------------------------


def test_narrow_screens_keep_the_first_columns_and_wide_ones_add_more() -> None:
    at_80 = render(DOCUMENTS["status"], width=80).splitlines()
    at_120 = render(DOCUMENTS["status"], width=120).splitlines()
    header_80 = next(line for line in at_80 if line.startswith("card "))
    header_120 = next(line for line in at_120 if line.startswith("card "))
    first = ["card", "state", "util", "memory", "power/cap", "temp", "pcie"]
    assert header_80.split()[:7] == first and "sm" not in header_80.split()
    assert header_120.split()[:7] == first and {"pci", "brake", "vram"} <= set(header_120.split())
    assert max(len(line) for line in at_80) <= 80
    assert max(len(line) for line in at_120) <= 120


def test_only_shows_the_cards_asked_for() -> None:
    doc = copy.deepcopy(DOCUMENTS["status"])
    first = doc["cards"][0]
    doc["cards"] = [{**first, "index": i, "pci_bus_id": pci} for i, pci in enumerate(PCI_IDS)]
    now = datetime(2026, 12, 3, 4, 0, tzinfo=UTC)
    text = plain(rig_view(doc, ViewSource("http://rig:8170"), now, Screen(), only={1, 3}))
    assert PCI_IDS[1] in text and PCI_IDS[3] in text
    assert PCI_IDS[0] not in text and PCI_IDS[2] not in text


def settled(status: dict[str, Any]) -> bool:
    """The latch is set (at once, from memory) and a poll has judged the Xid's check since."""
    failing = {(c["id"], c["card"]) for c in status["checks"] if c["severity"] == "critical"}
    return bool(status["recovery"]["reboot_required"]) and ("xid_since_boot", 1) in failing


@pytest.fixture(scope="module")
def xid31(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    """The ``xid31`` rig once its Xid 31 has set the reboot latch (no engine: quicker)."""
    tmp = tmp_path_factory.mktemp("top-xid31")
    config = tmp / "fleet.toml"
    config.write_text("[serving]\nautostart = false\n[poll]\ninterval_s = 0.5\n")
    scenario = sooner(tmp, "xid31")  # its Xid 31 at 2 s rather than 20 s
    daemon = start_fleetd(tmp, tmp / "state", simulate=str(scenario), config=config)
    try:
        wait_until(
            lambda: settled(daemon.get("/api/v1/status").json()),
            60,
            "the xid31 scenario's Xid 31 to set the latch and fail its check",
        )
        yield daemon
    finally:
        stop_all([daemon])


def words_of(text: str) -> set[str]:
    return set(text.split())


# Words that change between two frames (ages, clock), never split by the layout.
CHANGING = re.compile(r"^\d+[hm]\d+[ms]$|^\(?\d[\d,.:/]*")


def split_words(screen: list[str], whole: set[str]) -> list[str]:
    """Words on ``screen`` that are not words of the unwrapped frame: cut-off pieces."""
    cut = []
    for word in words_of("\n".join(screen)):
        if word in whole or CHANGING.match(word) or word == "…":
            continue
        if word.endswith("…") and any(w.startswith(word[:-1]) for w in whole):
            continue  # a word longer than the line, shortened visibly
        cut.append(word)
    return cut


@pytest.mark.slow(seconds=10)
@pytest.mark.parametrize(("cols", "rows"), [(80, 24), (120, 40)])
def test_top_on_a_real_screen_shows_every_card_the_verdict_and_the_latch(
    xid31: Fleetd, cols: int, rows: int
) -> None:
    argv = [sys.executable, "-m", "daemon.fleetctl", "--url", xid31.url, "top"]
    with tmux_screen([*argv, "--interval", "0.5"], cols, rows) as screen:
        shown = screen.wait_for("REBOOT REQUIRED")
        screen.keys("q")
    whole = words_of(run_fleetctl("--url", xid31.url, "top").stdout)  # unwrapped, piped
    assert shown[0].startswith("CRITICAL"), shown
    assert any(line.startswith("advice: ") for line in shown), shown
    for index in range(4):
        # each card's row: its index, then its state or the tag of its failing check
        assert any(re.match(rf"^\s+{index}\*?\s+(ok|warning|Xid 31)\s", line) for line in shown)
    assert any("xid_since_boot card 1" in line for line in shown), shown  # the failing check
    assert all(len(line) <= cols for line in shown)
    assert split_words(shown, whole) == [], shown
    header = next(line for line in shown if line.startswith("card ")).split()
    assert ("brake" in header) is (cols >= 120), header  # wider screens add columns


def test_status_fits_the_terminal_and_colours_only_when_allowed(xid31: Fleetd) -> None:
    argv = [sys.executable, "-m", "daemon.fleetctl", "--url", xid31.url, "status"]
    colour = re.compile(rb"\x1b\[[0-9;]*3[0-7]m")
    for flags, env, coloured in (
        ([], {}, True),
        (["--no-color"], {}, False),
        ([], {"NO_COLOR": "1"}, False),
    ):
        proc, master = spawn_in_pty([*argv[:5], *flags, *argv[5:]], rows=24, cols=80, env=env)
        seen = bytearray()
        try:
            read_until(master, b"fix: ", 30, seen=seen)
            assert proc.wait(10) == 2  # CRITICAL
            read_to_end(master, 5, seen)  # the lines drawn after "fix: " too
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(master)
        assert bool(colour.search(seen)) is coloured, (flags, env)
        assert seen.index(b"overall") < seen.index(b"REBOOT REQUIRED") < seen.index(b"power/cap")


def test_a_rollback_pin_is_short_enough_for_a_status_line() -> None:
    digest = "registry.example/vllm/dsv4-fork@sha256:" + "0123456789abcdef" * 4
    assert pinned_text(digest) == "dsv4-fork@sha256:0123456789ab"
    assert pinned_text("dsv4-fork:latest") == "dsv4-fork:latest"  # not a digest: as is
