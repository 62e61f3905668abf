"""``fleetctl rollback`` on a live simulated fleetd with two builds of one container image.

One daemon, one story in order (each step needs the one before): a docker profile (the
DSV4 preset) runs under ``--simulate`` with simulated images; its first build passes the
canaries; a simulated rebuild of the same tag (a new digest, a build that corrupts
copies) fails them; ``fleetctl builds`` names the first as the last good build;
``fleetctl rollback`` refuses an unknown build (2, naming the known ones), then serves the
first build's digest through the switch (the engine runs that build again, its canaries
pass), and ``fleetctl serve`` of the profile ends the pin.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from daemon.cli.views.rigview import pinned_text
from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=15)

IMAGE = "dsv4-a100:devel"
CONFIG = """
[poll]
interval_s = 0.5
[serving]
profile = "dsv4"
probe_interval_s = 0.3
stop_timeout_s = 5
metrics_interval_s = 0.5
provenance_labels = ["dsv4.patch-series"]
[serving.profiles.dsv4]
preset = "dsv4-flash-pp4-dspark"
model = "/models/DeepSeek-V4-Flash-0731"
port = 0
expected_decode_tok_s = 5.0
expected_prefill_tok_s = 5.0
[canary]
interval_s = 3600
busy_running_requests = 0
timeout_s = 20
identifiers = 10
throughput_prompt_tokens = 200
throughput_max_tokens = 16
"""


def fleetctl(daemon: Fleetd, *args: str) -> subprocess.CompletedProcess[str]:
    return run_fleetctl_here(
        "--url", daemon.url, *args, env={"CMPFLEET_STATE_DIR": str(daemon.state_dir)}
    )


def serving(daemon: Fleetd) -> dict[str, Any]:
    document: dict[str, Any] = daemon.get("/api/v1/status").json()["serving"]
    return document


def builds(daemon: Fleetd) -> dict[str, Any]:
    done = fleetctl(daemon, "builds", "--json")
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def current_build(daemon: Fleetd) -> dict[str, Any] | None:
    return next((b for b in builds(daemon)["builds"] if b["current"]), None)


def canary_round(daemon: Fleetd) -> dict[str, str]:
    done = fleetctl(daemon, "canary", "run", "--json")
    assert done.returncode in (0, 1, 2), done.stdout + done.stderr
    return {c["name"]: c["result"] for c in json.loads(done.stdout)["canaries"]}


def test_rollback_serves_the_last_good_builds_digest(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text(CONFIG)
    daemon = start_fleetd(
        tmp_path, tmp_path / "state", config=config,
        env={"CMPFLEET_SIM_ENGINE_READY_AFTER_S": "0.3"},
    )  # fmt: skip
    try:
        wait_until(lambda: serving(daemon)["state"] == "ready", 60, "the engine ready")
        wait_until(lambda: current_build(daemon) is not None, 30, "the first build recorded")
        first = current_build(daemon)
        assert first is not None and first["image"] == IMAGE
        assert canary_round(daemon)["copy_fidelity"] == "pass"

        # Only one build, and it is serving: nowhere to go back to (refused, exit 4).
        none_yet = fleetctl(daemon, "rollback")
        assert none_yet.returncode == 4, none_yet.stdout + none_yet.stderr
        assert "no earlier build whose canaries passed" in none_yet.stderr

        # The tag is rebuilt (a new digest; from its next start it corrupts copies).
        rebuilt = daemon.post(
            "/api/v1/sim/rebuild",
            {"image": IMAGE, "engine": {"corrupt_identifiers_pct": 60}},
        )
        assert rebuilt.status_code == 200, rebuilt.text
        assert rebuilt.json()["digest"] != first["image_digest"]
        assert fleetctl(daemon, "restart").returncode == 0

        def second_build() -> dict[str, Any] | None:
            found = current_build(daemon)
            return found if found is not None and found["id"] != first["id"] else None

        wait_until(lambda: second_build() is not None, 30, "the rebuilt build recorded")
        second = second_build()
        assert second is not None and second["image_digest"] == rebuilt.json()["digest"]
        assert canary_round(daemon)["copy_fidelity"] == "fail"
        document = builds(daemon)
        assert document["last_good"]["id"] == first["id"]
        human = fleetctl(daemon, "builds")
        assert f"last good build: {first['name']}" in human.stdout, human.stdout

        # No token: refused before anything moves.
        assert daemon.post("/api/v1/builds/rollback", {}, token=None).status_code == 401
        unknown = fleetctl(daemon, "rollback", "--to", "zzzzzzzz")
        assert unknown.returncode == 2, unknown.stdout + unknown.stderr
        assert first["build_key"][:8] in unknown.stderr
        assert second["build_key"][:8] in unknown.stderr

        rolled = fleetctl(daemon, "rollback", "--json")
        assert rolled.returncode == 0, rolled.stdout + rolled.stderr
        answer = json.loads(rolled.stdout)
        assert answer["build"]["id"] == first["id"] and answer["profile"] == "dsv4"
        assert answer["image"] == first["image_digest"]
        assert answer["switch"]["phase"] == "done" and answer["serving"]["state"] == "ready"
        now = serving(daemon)
        assert now["pinned_image"] == first["image_digest"]
        status_text = fleetctl(daemon, "status").stdout  # the pin in the human view too
        assert f"pinned to {pinned_text(first['image_digest'])} (rollback)" in status_text
        # The engine runs the first build again: the same build is current, and it copies.
        wait_until(
            lambda: (current_build(daemon) or {}).get("id") == first["id"], 30, "build A again"
        )
        assert canary_round(daemon)["copy_fidelity"] == "pass"
        shown = fleetctl(daemon, "recipe", "show", "--json")
        assert first["image_digest"] in json.loads(shown.stdout)["argv"], shown.stdout
        audit = daemon.get("/api/v1/events?kind=operator&limit=20").json()
        assert any(first["image_digest"] in e["message"] for e in audit), audit

        # Rolled back already: the same build again is in force, nothing moves.
        again = fleetctl(daemon, "rollback", "--to", first["build_key"][:8], "--json")
        assert again.returncode == 0, again.stdout + again.stderr
        assert json.loads(again.stdout)["already_active"] is True

        # serve of the profile ends the pin: the tag (the rebuilt build) again.
        back = fleetctl(daemon, "serve", "dsv4")
        assert back.returncode == 0, back.stdout + back.stderr
        assert "pinned_image" not in serving(daemon)
        wait_until(
            lambda: (current_build(daemon) or {}).get("id") == second["id"], 30, "build B again"
        )
    finally:
        stop_all([daemon])
