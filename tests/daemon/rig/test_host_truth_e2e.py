"""Host truth end to end: a real fleetd under ``--simulate``, driven by a real fleetctl.

``bad-hbm``: the memory test is refused while the engine runs (exit 4), finds card 3 with
the engine stopped (exit 2, naming it, with its block map; moving-inversions alone finds
it too), finds card 1 only in the stress mode (``--minutes``), is stored as ``diag``
events and keeps cards 3 and 1 CRITICAL; the status carries the host section and the cards'
host facts, and fleetd recorded the host baseline at its first start. ``boot-drift``: a
confirmed reboot is refused naming the next boot's stock kernel; ``--force`` boots it, and
fleetd's polls then judge the drift (host_kernel and bar1 critical).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon.statedir import StateDir
from hwcheck.hostfacts.baseline import load_baseline_file
from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until

pytestmark = pytest.mark.slow(seconds=10)


def fleetctl(daemon: Fleetd, *args: str) -> Any:
    return run_fleetctl_here("--url", daemon.url, *args, env={"FLEETCTL_TOKEN": daemon.token})


def status(daemon: Fleetd) -> dict[str, Any]:
    answer = daemon.get("/api/v1/status")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


@pytest.fixture(scope="module")
def bad_hbm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("bad-hbm")
    config = tmp / "fleet.toml"
    config.write_text("[serving]\nstop_timeout_s = 5\n")
    daemon = start_fleetd(tmp, tmp / "state", simulate="bad-hbm", config=config)
    try:
        wait_until(lambda: status(daemon)["serving"]["state"] == "ready", 30, "the engine")
        yield daemon
    finally:
        stop_all([daemon])


def test_memtest_is_refused_while_the_engine_runs_then_finds_card_3(bad_hbm: Fleetd) -> None:
    refused = fleetctl(bad_hbm, "diag", "memtest", "--gib", "1")
    assert refused.returncode == 4, refused.stderr
    assert refused.stdout == ""
    assert refused.stderr.strip().splitlines() == [
        "fleetctl: the engine is ready: stop it first (fleetctl stop); the memory test needs "
        "the cards to itself"
    ]

    assert fleetctl(bad_hbm, "stop").returncode == 0
    found = fleetctl(bad_hbm, "diag", "memtest", "--json")
    assert found.returncode == 2, found.stderr
    assert found.stderr == ""  # no progress into a pipe
    run = json.loads(found.stdout)
    assert (run["gib"], run["patterns"][0], run["passes"], run["minutes"]) == (None, "solid", 1, 0)
    assert [(c["card"], c["outcome"]) for c in run["cards"]] == [
        (0, "passed"),
        (1, "passed"),  # its HBM fails only under load: every fixed pattern passes it
        (2, "passed"),
        (3, "failed"),
    ]
    assert run["cards"][3]["verdict"].startswith("a few fixed blocks")

    march = fleetctl(bad_hbm, "diag", "memtest", "--patterns", "moving-inversions", "--json")
    assert march.returncode == 2, march.stderr
    card3 = json.loads(march.stdout)["cards"][3]
    assert (card3["card"], card3["outcome"], card3["pattern"]) == (3, "failed", "moving-inversions")
    assert card3["blocks"] and card3["blocks_failed"] == len(card3["blocks"])
    assert card3["runs"][0]["first_bad"]

    stress = fleetctl(
        bad_hbm, "diag", "memtest", "--card", "1", "--minutes", "1", "--patterns", "solid"
    )
    assert stress.returncode == 2, stress.stderr
    assert "memory test found errors on card(s) 1" in stress.stdout
    assert "errors everywhere under load" in stress.stdout
    # The per-pattern table of the failing card. About fifteen cycles a simulated minute: each
    # cycle's sweep takes real time too, so a loaded machine fits fewer (14 seen at load 10).
    assert re.search(r"stress \(1[0-5] cycles\)", stress.stdout), stress.stdout
    human = fleetctl(bad_hbm, "diag", "memtest", "--card", "3", "--patterns", "solid,address")
    assert human.returncode == 2
    assert "memory test found errors on card(s) 3" in human.stdout
    assert "failed blocks (64 KiB): #5 x" in human.stdout

    doc = status(bad_hbm)
    memtest = [c for c in doc["checks"] if c["id"] == "memtest" and c["severity"] != "ok"]
    assert [(c["card"], c["severity"]) for c in memtest] == [(1, "critical"), (3, "critical")]
    assert doc["overall"] == "critical"
    events = json.loads(fleetctl(bad_hbm, "events", "--kind", "diag", "--json").stdout)
    assert len(events) == 4
    assert {e["severity"] for e in events} == {"critical"}
    overview = bad_hbm.get("/api/v1/diag/memtest").json()
    assert (overview["running"], overview["progress"]) == (False, [])
    assert {c["card"]: c["outcome"] for c in overview["cards"]}[3] == "failed"
    unknown = fleetctl(bad_hbm, "diag", "memtest", "--patterns", "solid,galpat")
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        "fleetctl: unknown pattern 'galpat' (the patterns: solid, checkerboard, walking, "
        "address, moving-inversions, random)"
    ]
    restart = fleetctl(bad_hbm, "start", "--no-wait")
    assert restart.returncode == 4  # a card that failed its memory test is critical


def test_the_status_carries_the_host_truth(bad_hbm: Fleetd) -> None:
    doc = status(bad_hbm)

    host = doc["host"]
    assert host["facts"]["running_kernel"] == "6.8.12-cmp-bar1"
    assert host["facts"]["default_boot"]["kernel"] == "6.8.12-cmp-bar1"
    assert {p["status"] for p in host["facts"]["p2p"]} == {"ok"}
    assert host["baseline"]["kernel_release"] == "6.8.12-cmp-bar1"
    assert host["tensor_parallel_size"] == 1
    for card in doc["cards"]:
        assert card["bar1_total_mib"] == 65536
        assert card["memory_clock_max_mhz"] == 1728
        assert card["driver"] == "nvidia"
        assert card["aer"] == {"correctable": 0, "nonfatal": 0, "fatal": 0}
    ids = {c["id"] for c in doc["checks"]}
    assert {"host_kernel", "kernel_cmdline", "driver_module", "bar1", "p2p"} <= ids
    assert {"vbios", "clocks", "pcie_errors", "memtest"} <= ids
    recorded = load_baseline_file(StateDir(bad_hbm.state_dir).host_baseline)
    assert recorded is not None
    assert len(recorded.cards) == 4
    events = json.loads(fleetctl(bad_hbm, "events", "--kind", "daemon", "--json").stdout)
    assert any("host baseline recorded" in e["message"] for e in events)


def test_boot_drift_refuses_the_reboot_and_a_forced_one_boots_the_stock_kernel(
    tmp_path: Path,
) -> None:
    """``boot-drift``: the next boot is a stock kernel. ``reboot`` says so, ``--confirm``
    refuses naming the entry (nothing stopped), ``--force`` reboots into it, and fleetd's
    polls then judge the stock kernel (host_kernel and bar1 critical) as a real rig's."""
    daemon = start_fleetd(tmp_path, tmp_path / "state", simulate="boot-drift")
    try:
        wait_until(lambda: status(daemon)["serving"]["state"] == "ready", 30, "the engine")
        pid = status(daemon)["serving"]["pid"]
        explained = fleetctl(daemon, "reboot")
        assert explained.returncode == 0, explained.stderr
        assert "the default boot entry boots 6.8.0-49-generic" in explained.stdout
        refused = fleetctl(daemon, "reboot", "--confirm")
        assert refused.returncode == 4, refused.stdout + refused.stderr
        assert "boots 6.8.0-49-generic (entry 'Simulated Linux 6.8.0-49-generic'" in refused.stderr
        assert "not the baseline kernel 6.8.12-cmp-bar1" in refused.stderr
        assert "--force" in refused.stderr and "nothing was stopped" in refused.stderr
        assert status(daemon)["serving"]["pid"] == pid  # the engine was left alone
        api = daemon.post("/api/v1/recovery/reboot", {"confirm": True})
        assert api.status_code == 409 and api.json()["code"] == "boot_entry"
        # Latched on this rig, the advice says the boot entry comes first (the plain
        # reboot --confirm it used to give is refused, as above).
        assert daemon.post("/api/v1/sim/xid", {"card": 1, "xid": 31}).status_code == 200
        wait_until(lambda: status(daemon)["recovery"]["reboot_required"], 30, "the latch")
        advice = status(daemon)["recovery"]["advice"]
        assert advice.startswith("fix the boot entry first ("), advice
        assert "6.8.0-49-generic" in advice and "fleetctl reboot --confirm" in advice
        wait_until(lambda: status(daemon)["serving"]["state"] == "stopped", 30, "the stop")

        boot_before = status(daemon)["rig"]["boot_id"]
        forced = fleetctl(daemon, "reboot", "--confirm", "--force")
        assert forced.returncode == 0, forced.stderr
        wait_until(lambda: status(daemon)["rig"]["boot_id"] != boot_before, 30, "the reboot")

        wait_until(
            lambda: (
                {("host_kernel", None), ("bar1", 0)}
                <= {
                    (c["id"], c["card"])
                    for c in status(daemon)["checks"]
                    if c["severity"] == "critical"
                }
            ),
            30,
            "the stock kernel judged",
        )
        # The bring-up runs on recovery's worker after the boot's first judgement: its
        # record may come a moment after the checks it read.
        wait_until(lambda: status(daemon)["recovery"]["bring_up"], 30, "the bring-up's record")
        result = fleetctl(daemon, "status", "--json")
        assert result.returncode == 2
        doc = json.loads(result.stdout)
        critical = {(c["id"], c["card"]) for c in doc["checks"] if c["severity"] == "critical"}
        assert {("bar1", card) for card in range(4)} <= critical
        assert {c["severity"] for c in doc["checks"] if c["id"] == "p2p"} == {"warning"}
        assert doc["host"]["facts"]["running_kernel"] == "6.8.0-49-generic"
        assert {card["bar1_total_mib"] for card in doc["cards"]} == {256}
        assert doc["serving"]["state"] == "stopped"  # the bring-up refused: not safe
        assert "engine not started: host_kernel" in doc["recovery"]["bring_up"]["summary"]
    finally:
        stop_all([daemon])
