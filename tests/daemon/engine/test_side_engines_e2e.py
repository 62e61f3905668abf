"""Several engines on one rig (issue 42): ``[serving] run = ["low", "high"]`` on a
simulated 8-card rig runs two supervised engines, 0-3 and 4-7, each with its own state
files, port and pid; a crash of one restarts that one alone (the other's pid unchanged);
an Xid 31 on card 6 stops both and the latch refuses both; after the simulated
reboot both come back."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from daemon.engine.fleet import side_state_dir
from tests.support.cli import run_fleetctl
from tests.support.fleetd import Fleetd, kill_engine, start_fleetd, stop_all, wait_until

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=80)

SCENARIOS = Path(__file__).resolve().parents[3] / "hwcheck" / "sim" / "scenarios"
# The documented example of two engines (4+4) on the simulated 8-card rig, as shipped.
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "healthy-8-two-engines.toml"
WAIT_S = 60


def engines(daemon: Fleetd) -> dict[str, dict[str, Any]]:
    listed = daemon.get("/api/v1/status").json()["engines"]
    return {str(engine["profile"]): engine for engine in listed}


def both_ready(daemon: Fleetd) -> bool:
    found = engines(daemon)
    return set(found) == {"low", "high"} and all(
        engine["state"] == "ready" for engine in found.values()
    )


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("side")
    state = tmp / "state"
    daemon = start_fleetd(tmp, state, simulate=str(SCENARIOS / "healthy-8.toml"), config=EXAMPLE)
    try:
        yield daemon
    finally:
        stop_all([daemon])
        kill_engine(side_state_dir(state, "high"))


def test_both_engines_run_each_on_its_own_cards_port_and_files(rig: Fleetd) -> None:
    wait_until(lambda: both_ready(rig), WAIT_S, "both engines ready")
    found = engines(rig)
    assert found["low"]["cards"] == [0, 1, 2, 3]
    assert found["high"]["cards"] == [4, 5, 6, 7]
    assert found["low"]["url"] != found["high"]["url"]
    assert found["low"]["pid"] != found["high"]["pid"]
    # The primary keeps the single-engine files; the side engine its own directory.
    status = rig.get("/api/v1/status").json()
    assert status["serving"]["profile"] == "low"
    assert (rig.state_dir / "engine.log").exists()
    assert (side_state_dir(rig.state_dir, "high") / "engine.log").exists()
    page = rig.get("/metrics").text
    for name in ("low", "high"):
        assert f'cmpfleet_serving_engine_state{{engine="{name}",state="ready"}} 1.0' in page
        assert f'cmpfleet_serving_engine_restarts_total{{engine="{name}"}}' in page
    # Every engine's cards are in a profile, and every engine's processes are the rig's own
    # (a side engine's workers read as foreign would fail foreign_gpu_processes).
    assert all(card["in_profile"] for card in status["cards"])
    marked = {
        sample.labels["gpu"]: sample.value
        for family in text_string_to_metric_families(page)
        if family.name == "cmpfleet_gpu_in_profile"
        for sample in family.samples
    }
    assert marked == {str(i): 1.0 for i in range(8)}
    own = set(status["daemon"]["gpu_pids"])
    assert {found["low"]["pid"], found["high"]["pid"]} <= own
    # The simulated cards show each engine's process on its own cards (as NVML would).
    wait_until(
        lambda: (
            [
                {p["pid"] for p in card["processes"] or ()}
                for card in rig.get("/api/v1/status").json()["cards"]
            ]
            == [{found["low"]["pid"]}] * 4 + [{found["high"]["pid"]}] * 4
        ),
        WAIT_S,
        "each engine's pid on its own cards",
    )


def fleetctl(daemon: Fleetd, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"CMPFLEET_STATE_DIR": str(daemon.state_dir)}
    return run_fleetctl("--url", daemon.url, *args, env=env)


def test_fleetctl_moves_one_engine_by_name_and_asks_for_a_name_with_several(
    rig: Fleetd,
) -> None:
    wait_until(lambda: both_ready(rig), WAIT_S, "both engines ready")
    low_pid = engines(rig)["low"]["pid"]
    bare = fleetctl(rig, "stop")
    assert bare.returncode == 2, bare.stdout + bare.stderr
    assert bare.stderr.strip() == (
        "fleetctl: this rig runs 2 engines (low, high): name the one to stop, "
        "e.g. `fleetctl stop low`"
    )
    stopped = fleetctl(rig, "stop", "high", "--timeout", "60")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    found = engines(rig)
    assert found["high"]["state"] == "stopped" and found["high"]["pid"] is None
    assert found["low"]["state"] == "ready" and found["low"]["pid"] == low_pid
    logs = fleetctl(rig, "logs", "high", "--lines", "5")
    assert logs.returncode == 0 and logs.stdout.strip(), logs.stdout + logs.stderr
    started = fleetctl(rig, "start", "high", "--timeout", "60")
    assert started.returncode == 0, started.stdout + started.stderr
    assert both_ready(rig) and engines(rig)["low"]["pid"] == low_pid
    unknown = fleetctl(rig, "restart", "nosuch")
    assert unknown.returncode == 2 and "engines: low, high" in unknown.stderr


def test_a_crash_of_one_engine_restarts_it_alone(rig: Fleetd) -> None:
    wait_until(lambda: both_ready(rig), WAIT_S, "both engines ready")
    before = engines(rig)
    low_pid, high_pid = before["low"]["pid"], before["high"]["pid"]
    os.killpg(high_pid, signal.SIGKILL)
    wait_until(
        lambda: engines(rig)["high"]["restarts"] > before["high"]["restarts"],
        WAIT_S,
        "the crashed engine restarted",
    )
    wait_until(lambda: both_ready(rig), WAIT_S, "the crashed engine ready again")
    after = engines(rig)
    assert after["low"]["pid"] == low_pid
    assert after["high"]["pid"] not in (None, high_pid)
    # The side engine's events name it (and so do the alerts built on them).
    events = rig.get("/api/v1/events?kind=serving&limit=200").json()
    crashed = [e["message"] for e in events if "killed by signal 9" in e["message"]]
    assert crashed and all(m.startswith("engine high: ") for m in crashed), crashed
    # So do its controller's rows in the one audit trail (the restart was high's alone).
    decisions = rig.get("/api/v1/status").json()["recovery"]["decisions"]
    restarts = [row for row in decisions if row["action"] == "restart_after"]
    assert restarts and all(row["reason"].startswith("engine high: ") for row in restarts), (
        decisions
    )
    # Its crash is kept in the black box with its own log, named by its engine.
    wait_until(
        lambda: any(
            c.get("engine") == "high" for c in rig.get("/api/v1/crashes").json()["crashes"]
        ),
        WAIT_S,
        "the side engine's crash bundle",
    )
    bundle = next(
        c for c in rig.get("/api/v1/crashes").json()["crashes"] if c.get("engine") == "high"
    )
    shown = rig.get(f"/api/v1/crashes/{bundle['id']}").json()
    assert shown["summary"]["notices"][0]["engine"] == "high"
    assert after["low"]["restarts"] == before["low"]["restarts"]


def test_a_hardware_xid_stops_both_and_the_latch_refuses_both_until_the_reboot(
    rig: Fleetd,
) -> None:
    wait_until(lambda: both_ready(rig), WAIT_S, "both engines ready")
    answer = rig.post("/api/v1/sim/xid", {"card": 6, "xid": 31})
    assert answer.status_code == 200, answer.text
    wait_until(
        lambda: rig.get("/api/v1/status").json()["recovery"]["reboot_required"],
        WAIT_S,
        "the latch",
    )
    wait_until(
        lambda: all(e["state"] == "stopped" for e in engines(rig).values()),
        WAIT_S,
        "both engines stopped",
    )
    refused = rig.post("/api/v1/serving/start")
    assert refused.status_code == 409, refused.text
    assert all(e["pid"] is None for e in engines(rig).values())
    rebooted = rig.post("/api/v1/sim/reboot")
    assert rebooted.status_code == 200, rebooted.text
    wait_until(lambda: both_ready(rig), WAIT_S, "both engines back after the reboot")


def test_a_confirmed_reboot_stops_each_engine_cleanly_and_brings_both_back(rig: Fleetd) -> None:
    wait_until(lambda: both_ready(rig), WAIT_S, "both engines ready")
    boot = rig.get("/api/v1/status").json()["rig"]["boot_id"]
    # It answers once every engine stopped (two cold stops on a loaded machine): not 10 s.
    answer = rig.post("/api/v1/recovery/reboot", {"confirm": True}, timeout_s=WAIT_S)
    assert answer.status_code == 200, answer.text
    decisions = rig.get("/api/v1/status").json()["recovery"]["decisions"]
    drains = [row for row in decisions if row["action"] == "drain"]
    assert drains and "engine high stopped" in drains[0]["outcome"], drains
    wait_until(
        lambda: rig.get("/api/v1/status").json()["rig"]["boot_id"] != boot, WAIT_S, "new boot"
    )
    wait_until(lambda: both_ready(rig), WAIT_S, "both engines back after the reboot")


def test_the_xid31_8_scenario_stops_both_engines_and_latches(tmp_path: Path) -> None:
    """The built-in ``xid31-8`` (Xid 31 on card 6 about 20 s in) with the 4+4 example."""
    state = tmp_path / "state"
    daemon = start_fleetd(tmp_path, state, simulate="xid31-8", config=EXAMPLE)
    try:
        wait_until(lambda: both_ready(daemon), WAIT_S, "both engines ready before the Xid")
        wait_until(
            lambda: daemon.get("/api/v1/status").json()["recovery"]["reboot_required"],
            WAIT_S,
            "the latch after the scenario's Xid 31",
        )
        wait_until(
            lambda: all(e["state"] == "stopped" for e in engines(daemon).values()),
            WAIT_S,
            "both engines stopped",
        )
        assert set(engines(daemon)) == {"low", "high"}
        reason = daemon.get("/api/v1/status").json()["recovery"]["reason"]
        assert "Xid 31" in reason and "card 6" in reason, reason
        for name in ("low", "high"):
            refused = daemon.post("/api/v1/serving/start", {"engine": name})
            assert refused.status_code == 409, refused.text
            assert "reboot required" in refused.json()["detail"]
    finally:
        stop_all([daemon])
        kill_engine(side_state_dir(state, "high"))


def test_a_persons_stop_of_one_engine_outlives_a_fleetd_restart(tmp_path: Path) -> None:
    """Autostart respects a person's stop per engine: ``high`` stays down, ``low`` is adopted."""
    state = tmp_path / "state"
    healthy_8 = str(SCENARIOS / "healthy-8.toml")
    daemon = start_fleetd(tmp_path, state, simulate=healthy_8, config=EXAMPLE)
    try:
        wait_until(lambda: both_ready(daemon), WAIT_S, "both engines ready")
        low_pid = engines(daemon)["low"]["pid"]
        stopped = fleetctl(daemon, "stop", "high", "--timeout", "60")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert daemon.stop() == 0  # the engines outlive fleetd
        if daemon.peer is not None:
            daemon.peer.close()
        # READY=1 comes after each engine's adoption or autostart decision.
        daemon = start_fleetd(tmp_path, state, simulate=healthy_8, config=EXAMPLE)
        found = engines(daemon)
        assert found["high"]["state"] == "stopped" and found["high"]["pid"] is None, found
        assert found["low"]["pid"] == low_pid
    finally:
        stop_all([daemon])
        kill_engine(side_state_dir(state, "high"))
