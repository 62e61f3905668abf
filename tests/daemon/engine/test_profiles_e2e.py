"""Launch profiles on a real simulated fleetd: ``fleetctl profiles``, ``fleetctl serve``
(stop A cleanly, start B), the profile kept across a fleetd restart, an engine of another
profile reported as a drift and left running, and ``serve`` under the reboot latch.

One daemon (restarted where a test says so) walks through the story in order; the engines
are the real simulated engine as child processes, the API and fleetctl real too.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from daemon.store import Store
from tests.support import loopback
from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import (
    Fleetd,
    free_port,
    latch_by_xid,
    start_fleetd,
    stop_all,
    wait_until,
)

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=30)

CONFIG = """
[serving]
profile = "{profile}"
probe_interval_s = 0.3
stop_timeout_s = 5
metrics_interval_s = 0.5

[serving.profiles.a]
preset = "sim-engine"
served_model_name = "model-a"

[serving.profiles.b]
preset = "sim-engine"
served_model_name = "model-b"
gpus = "0,1,2,3"
extra_args = ["--max-num-seqs", "4"]

[serving.profiles.c]
preset = "sim-engine"
served_model_name = "model-c"
port = {c_port}

[serving.profiles.docker]
preset = "dsv4-flash-pp4-dspark"
model = "/models/DeepSeek-V4-Flash"
port = 0
"""


@dataclass
class Rig:
    tmp: Path
    config: Path
    daemon: Fleetd
    c_port: int  # profile c's fixed port (a test holds it with a socket of its own)

    def serving(self) -> dict[str, Any]:
        document: dict[str, Any] = self.daemon.get("/api/v1/status").json()["serving"]
        return document

    def fleetctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {"CMPFLEET_STATE_DIR": str(self.daemon.state_dir)}
        return run_fleetctl_here("--url", self.daemon.url, *args, env=env)

    def restart(self, profile: str | None = None) -> None:
        """fleetd stops (the engine outlives it) and starts again on the same state dir."""
        if profile is not None:
            self.config.write_text(CONFIG.format(profile=profile, c_port=self.c_port))
        assert self.daemon.stop(signal.SIGTERM) == 0
        if self.daemon.peer is not None:
            self.daemon.peer.close()
        self.daemon = start_fleetd(self.tmp, self.daemon.state_dir, config=self.config)

    def store(self) -> Store:
        return Store.open(f"sqlite:///{self.daemon.state_dir / 'fleet.db'}")


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("profiles")
    config = tmp / "fleet.toml"
    c_port = free_port()
    config.write_text(CONFIG.format(profile="a", c_port=c_port))
    holder = Rig(tmp, config, start_fleetd(tmp, tmp / "state", config=config), c_port)
    try:
        wait_until(lambda: holder.serving()["state"] == "ready", 30, "profile a ready")
        yield holder
    finally:
        stop_all([holder.daemon])


def test_profiles_lists_them_with_the_one_in_force_and_their_lint(rig: Rig) -> None:
    shown = rig.fleetctl("profiles", "--json")
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert (document["active"], document["configured"]) == ("a", "a")
    rows = {row["name"]: row for row in document["profiles"]}
    assert list(rows) == ["default", "a", "b", "c", "docker"]  # the simulated default joins them
    assert rows["a"]["active"] and not rows["b"]["active"]
    assert rows["b"]["gpus"] == "0,1,2,3"
    assert rows["b"]["served_model_name"] == "model-b"
    assert {row["lint"]["verdict"] for row in rows.values()} == {"clean"}
    human = rig.fleetctl("profiles")
    assert human.returncode == 0
    lines = human.stdout.splitlines()
    assert lines[0].split()[:3] == ["profile", "lint", "gpus"]  # piped: one plain row each
    assert lines[1].startswith("  default ") and "the simulated engine" in lines[1]
    assert lines[2].startswith("* a ") and "active, autostart" in lines[2]
    assert lines[3].startswith("  b ") and " clean " in lines[3] and "0,1,2,3" in lines[3]
    assert rig.serving()["profile"] == "a"


def test_serve_b_stops_a_cleanly_and_starts_b(rig: Rig) -> None:
    before = rig.serving()
    old_pid = before["pid"]
    served = rig.fleetctl("serve", "b")
    assert served.returncode == 0, served.stderr
    assert served.stdout.startswith("profile b: engine ready")
    assert "a -> b" in served.stderr  # the progress
    serving = rig.serving()
    assert (serving["profile"], serving["state"]) == ("b", "ready")
    assert serving["pid"] != old_pid and not psutil.pid_exists(old_pid)
    assert serving["switch"]["phase"] == "done"
    auth = {"Authorization": f"Bearer {rig.daemon.token}"}
    recipe = loopback.get(rig.daemon.url + "/api/v1/serving/recipe", headers=auth).json()
    argv = recipe["spec"]["argv"]
    assert argv[argv.index("--served-model-name") + 1] == "model-b"
    assert argv[argv.index("--max-num-seqs") + 1] == "4"
    assert recipe["spec"]["env"]["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert recipe["spec"]["profile"] == "b"
    assert recipe["text"].startswith("profile:      b\n")
    # A's engine stopped with its own graceful signal: its launch ended, no SIGKILL.
    store = rig.store()
    try:
        launches = store.list_launches(limit=5)
        ended = next(row for row in launches if row.ended_at is not None)
        assert ended.exit_code is not None and ended.exit_code != -signal.SIGKILL
        audit = store.list_audit(limit=50)
    finally:
        store.close()
    switch = [row for row in audit if row.action == "profile_switch"]
    assert [(row.target, row.outcome) for row in switch] == [("b", "done")]
    events = rig.daemon.get("/api/v1/events?kind=operator&limit=20").json()
    assert any(e["message"] == "launch profile switched from a to b by api" for e in events)


def test_serve_an_unknown_profile_exits_2_naming_the_known_ones(rig: Rig) -> None:
    result = rig.fleetctl("serve", "nosuch")
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == "fleetctl: serve nosuch: no profile 'nosuch' (known: default, a, b, c, docker)"
    )
    as_json = rig.fleetctl("--json", "serve", "nosuch")
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["exit_code"] == 2
    assert rig.serving()["profile"] == "b"


def test_serving_the_profile_in_force_changes_nothing(rig: Rig) -> None:
    pid = rig.serving()["pid"]
    result = rig.fleetctl("serve", "b")
    assert result.returncode == 0, result.stderr
    assert "already in force" in result.stdout
    assert rig.serving()["pid"] == pid


def test_serve_b_with_its_port_held_refuses_before_stopping_a(rig: Rig) -> None:
    """Both facts were known before anything stopped: the engine that serves keeps serving
    (a cold start is 20 to 45 minutes), and the refusal names who holds the port."""
    before = rig.serving()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", rig.c_port))
        squatter.listen()
        refused = rig.fleetctl("serve", "c")
    assert refused.returncode == 4, refused.stdout + refused.stderr
    line = refused.stderr.strip()
    assert line.startswith("fleetctl: serve c refused: ") and "\n" not in line
    assert f"port {rig.c_port} on 127.0.0.1 is taken: pid {os.getpid()} " in line
    after = rig.serving()
    assert (after["profile"], after["state"], after["pid"]) == ("b", "ready", before["pid"])
    assert (after.get("switch") or {}).get("profile") != "c"  # no switch was begun


def test_the_profile_in_force_outlives_a_fleetd_restart_and_its_engine_is_adopted(
    rig: Rig,
) -> None:
    pid = rig.serving()["pid"]
    rig.restart()
    wait_until(lambda: rig.serving()["state"] == "ready", 30, "the adopted engine ready")
    serving = rig.serving()
    assert (serving["profile"], serving["pid"], serving["adopted"]) == ("b", pid, True)
    assert serving["drift"] is None


def test_an_engine_of_another_profile_is_a_drift_left_running(rig: Rig) -> None:
    """The config now autostarts c (an edit wins over the older switch to b): the running
    engine is b's. It is not taken for c."""
    pid = rig.serving()["pid"]
    rig.restart(profile="c")
    wait_until(lambda: rig.serving()["drift"] is not None, 30, "the drift reported")
    serving = rig.serving()
    assert serving["profile"] == "c"
    assert serving["state"] == "stopped" and serving["pid"] is None
    assert serving["drift"]["pid"] == pid
    assert psutil.pid_exists(pid), "a drifted engine is left running"
    events = rig.daemon.get("/api/v1/events?kind=serving&limit=50").json()
    assert any(
        e["severity"] == "warning" and e["message"].startswith(f"not adopted: pid {pid}")
        for e in events
    )
    shown = rig.fleetctl("status")
    assert f"DRIFT: pid {pid} at " in shown.stdout and "profile c" in shown.stdout
    started = rig.fleetctl("start")
    assert started.returncode == 4
    assert "`fleetctl serve b` serves it as it is" in started.stderr
    assert f"kill -INT {pid}" in started.stderr  # a bare process: stopping it is a person's
    assert psutil.pid_exists(pid)
    # Serving the drifted engine's own profile adopts it: no cold start.
    served = rig.fleetctl("serve", "b")
    assert served.returncode == 0, served.stderr
    serving = rig.serving()
    assert (serving["profile"], serving["pid"], serving["state"]) == ("b", pid, "ready")
    assert serving["drift"] is None


def test_a_real_container_preset_runs_the_simulated_engine_in_its_place(rig: Rig) -> None:
    """Under --simulate a docker profile never calls the host's docker (none is installed
    here: it would fail): the simulated engine serves its model name on its port."""
    served = rig.fleetctl("serve", "docker")
    assert served.returncode == 0, served.stderr
    serving = rig.serving()
    assert (serving["profile"], serving["state"]) == ("docker", "ready")
    models = loopback.get(f"{serving['url']}/v1/models").json()
    assert [m["id"] for m in models["data"]] == ["dsv4s"]  # the preset's served name
    status = rig.daemon.get("/api/v1/status").json()
    processes = [p for card in status["cards"] for p in card["processes"]]
    assert {p["pid"] for p in processes} == {serving["pid"]}
    assert {p["container"] for p in processes} == {"cmpfleet-engine"}
    # What a real rig would run is still the recipe's docker line.
    shown = rig.fleetctl("recipe", "show", "--profile", "docker", "--config", str(rig.config))
    assert shown.returncode == 0, shown.stderr
    assert "docker run" in shown.stdout and "dsv4-a100:devel" in shown.stdout
    back = rig.fleetctl("serve", "b")
    assert back.returncode == 0, back.stderr


def test_under_the_latch_serve_exits_4_and_stops_nothing(rig: Rig) -> None:
    latch_by_xid(rig.daemon)
    result = rig.fleetctl("serve", "a")
    assert result.returncode == 4, result.stdout + result.stderr
    assert result.stderr.startswith("fleetctl: serve a refused: ")
    assert "reboot" in result.stderr
    assert rig.serving()["profile"] == "b"
