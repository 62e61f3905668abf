"""The deep round, builds and on_fail under a live simulated fleetd on ``deep-decay``.

One daemon, one test, in order (each step needs the one before): the short round passes;
``canary run --deep`` exits 2 with per-depth figures (copy fine at 16k, broken at 90k;
recall falling; the loop verdict); ``on_fail = "restart"`` restarts the engine once for
that round through recovery; a simulated image rebuild under the same tag (new digest,
new behaviour) makes a second build whose failing copy canary names both builds.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=10)

SCENARIOS = Path(__file__).resolve().parents[3] / "hwcheck" / "sim" / "scenarios"
CONFIG = """
[poll]
interval_s = 0.5
[serving]
probe_interval_s = 0.3
metrics_interval_s = 0.5
provenance_labels = ["dsv4.patch-series"]
[canary]
interval_s = 3600
busy_running_requests = 0
timeout_s = 20
identifiers = 10
throughput_prompt_tokens = 200
throughput_max_tokens = 16
depths = [16000, 90000, 110000]
on_fail = "restart"
"""


def fleetctl(daemon: Fleetd, *args: str) -> subprocess.CompletedProcess[str]:
    return run_fleetctl_here(
        "--url", daemon.url, *args, env={"CMPFLEET_STATE_DIR": str(daemon.state_dir)}
    )


def serving(daemon: Fleetd) -> dict[str, Any]:
    document: dict[str, Any] = daemon.get("/api/v1/status").json()["serving"]
    return document


def ready_again(daemon: Fleetd, restarts: int) -> bool:
    now = serving(daemon)
    return now["state"] == "ready" and now["restarts"] == restarts


def depth_figures(canary: dict[str, Any]) -> dict[int, float | None]:
    return {entry["depth"]: entry["figure"] for entry in canary["details"]["depths"]}


def test_deep_decay_breaks_deep_restarts_once_and_a_rebuild_names_both_builds(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "deep-decay-fast.toml"
    # The built-in scenario, decoding fast enough for a test ([engine] is its last table).
    scenario.write_text((SCENARIOS / "deep-decay.toml").read_text() + "tokens_per_s = 400.0\n")
    config = tmp_path / "fleet.toml"
    config.write_text(CONFIG)
    daemon = start_fleetd(
        tmp_path, tmp_path / "state", simulate=str(scenario), config=config,
        env={"CMPFLEET_SIM_ENGINE_READY_AFTER_S": "0.3"},
    )  # fmt: skip
    try:
        wait_until(lambda: ready_again(daemon, 0), 60, "the engine ready")
        first_pid = serving(daemon)["pid"]
        short = fleetctl(daemon, "canary", "run", "--json")
        assert short.returncode == 0, short.stdout + short.stderr  # short prompts: all fine

        deep = fleetctl(daemon, "canary", "run", "--deep", "--json")
        assert deep.returncode == 2, deep.stdout + deep.stderr

        # on_fail = "restart": one restart for the failing round, through recovery.
        wait_until(lambda: ready_again(daemon, 1), 60, "one automatic restart")
        assert serving(daemon)["pid"] != first_pid
        audit = daemon.get("/api/v1/events?kind=recovery&limit=20").json()
        restarts = [e for e in audit if "on_fail = restart" in e["message"]]
        assert len(restarts) == 1, audit

        # The deep verdicts judge the build: once the restarted engine's build is known (the
        # same one), they are current again, not stale.
        def deep_verdicts() -> dict[str, dict[str, Any]]:
            status = json.loads(fleetctl(daemon, "canary", "status", "--json").stdout)
            return {c["name"]: c for c in status["canaries"]}

        wait_until(lambda: deep_verdicts()["loop"]["result"] != "stale", 30, "current verdicts")
        found = deep_verdicts()
        copy, recall = depth_figures(found["copy_depth"]), depth_figures(found["recall"])
        assert copy[16_000] == 1.0 and copy[90_000] is not None and copy[90_000] < 0.5
        assert recall[16_000] == 1.0 > recall[110_000]
        assert found["copy_depth"]["details"]["breaks_at"] == 90_000
        assert found["loop"]["result"] == "fail"
        assert depth_figures(found["loop"]) == {16_000: 1.0, 90_000: 1.0, 110_000: 0.0}
        assert found["determinism"]["result"] == "pass"

        # A rebuild of the same tag: another digest, and (from its next start) a build that
        # corrupts short copies too.
        rebuilt = daemon.post(
            "/api/v1/sim/rebuild",
            {"engine": {"corrupt_identifiers_pct": 50}, "labels": {"dsv4.patch-series": "0001-0006"}},
        )  # fmt: skip
        assert rebuilt.status_code == 200, rebuilt.text
        assert fleetctl(daemon, "restart").returncode == 0

        # The round after the rebuilt engine gets ready fails its copy canary (and, with
        # on_fail = "restart", restarts it again: the breaker bounds that loop).
        def two_builds() -> dict[str, Any] | None:
            document: dict[str, Any] = json.loads(fleetctl(daemon, "builds", "--json").stdout)
            found = document["builds"]
            newest = found[0]["canaries"].get("copy_fidelity", {}) if found else {}
            return document if len(found) == 2 and newest.get("result") == "fail" else None

        wait_until(lambda: two_builds() is not None, 60, "the rebuilt build's failing round")
        builds = two_builds()
        assert builds is not None
        current, older = builds["builds"][0], builds["builds"][1]
        assert current["image"] == older["image"] == "cmpfleet/sim-engine:latest"
        assert current["image_digest"] != older["image_digest"]
        assert current["labels"] == {"dsv4.patch-series": "0001-0006"}
        assert current["engine_version"] and current["recipe_hash"] == older["recipe_hash"]
        assert older["canaries"]["copy_fidelity"]["result"] == "pass"
        assert older["canaries"]["copy_depth"]["depths"][0]["depth"] == 16_000
        texts = [r["text"] for r in builds["regressions"]]
        assert any(
            t.startswith("copy_fidelity: 100% on " + older["name"]) and current["name"] in t
            for t in texts
        ), texts
        human = fleetctl(daemon, "builds")
        assert human.returncode == 0 and "regression: copy_fidelity" in human.stdout
    finally:
        stop_all([daemon])
