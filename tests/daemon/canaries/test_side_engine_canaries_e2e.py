"""Canaries per engine (issue 42) under a live simulated fleetd running two engines.

``[serving] run = ["low", "high"]`` on the simulated 8-card rig: both engines' canaries
pass after ready, each engine's shown in the status's ``engines``, ``fleetctl canary
status`` and ``/metrics`` (the side engine's series labelled ``engine="high"``, the
primary's as with one engine). Then the side engine alone runs a rebuilt image that
corrupts copies: its canaries fail and ``on_fail = "hold"`` holds that engine only; the
primary's pid, state and canaries are untouched. One fleetd for the module, the story
in order (the failure comes last).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from daemon.engine.fleet import side_state_dir
from tests.support.engine_e2e import fleetctl
from tests.support.fleetd import Fleetd, kill_engine, start_fleetd, stop_all, wait_until

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=20)

SCENARIO = Path(__file__).resolve().parents[3] / "hwcheck" / "sim" / "scenarios" / "healthy-8.toml"
NAMES = {"copy_fidelity", "tool_calls", "reasoning_field", "throughput"}
WAIT_S = 90
# The side engine runs as a (simulated) container of its own image: rebuilding that image
# changes the side engine alone, from its next start.
SIDE_IMAGE = "side-engine:devel"
CONFIG = f"""
[serving]
run = ["low", "high"]
probe_interval_s = 0.3
metrics_interval_s = 0.5
stop_timeout_s = 5

[serving.profiles.low]
preset = "sim-engine"
gpus = "0,1,2,3"
served_model_name = "low-model"
# A third of the simulated engine's pace (30 decode, 1,600 prefill): 16 tokens are a short
# window, and a loaded test machine stalls it by more than the 60% the canary allows. These
# tests are about whose canaries run where, not about the host's CPU.
expected_decode_tok_s = 10.0
expected_prefill_tok_s = 500.0

[serving.profiles.high]
preset = "dsv4-flash-pp4-dspark"
image = "{SIDE_IMAGE}"
model = "/models/DeepSeek-V4-Flash-0731"
gpus = "4,5,6,7"
port = 0
served_model_name = "high-model"
expected_decode_tok_s = 5.0
expected_prefill_tok_s = 5.0

[canary]
interval_s = 3600
deep_interval_h = 0
busy_running_requests = 0
timeout_s = 20
identifiers = 40
throughput_prompt_tokens = 400
throughput_max_tokens = 16
on_fail = "hold"
"""


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("side-canaries")
    config = tmp / "fleet.toml"
    config.write_text(CONFIG)
    state = tmp / "state"
    daemon = start_fleetd(tmp, state, simulate=str(SCENARIO), config=config)
    try:
        yield daemon
    finally:
        stop_all([daemon])
        kill_engine(side_state_dir(state, "high"))


def status(daemon: Fleetd) -> dict[str, Any]:
    """The status document (``engines`` with each engine's ``canaries``)."""
    return dict(daemon.get("/api/v1/status").json())


def engines(daemon: Fleetd) -> dict[str, dict[str, Any]]:
    return {str(engine["profile"]): engine for engine in status(daemon)["engines"]}


def verdicts(engine: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in engine.get("canaries") or []}


def judged(engine: dict[str, Any]) -> bool:
    """Every short canary of this engine has a round's result (before one, each is skipped)."""
    found = verdicts(engine)
    return set(found) >= NAMES and all(found[name]["ts"] is not None for name in NAMES)


def canary_samples(daemon: Fleetd) -> dict[tuple[tuple[str, str], ...], float]:
    page = daemon.get("/metrics").text
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(page)
        if family.name == "cmpfleet_canary_result"
        for sample in family.samples
    }


def test_each_engine_runs_its_own_canaries_and_both_pass(rig: Fleetd) -> None:
    wait_until(
        lambda: set(engines(rig)) == {"low", "high"} and all(map(judged, engines(rig).values())),
        WAIT_S,
        "both engines' after-ready rounds",
    )
    found = engines(rig)
    for name in ("low", "high"):
        results = {n: c["result"] for n, c in verdicts(found[name]).items() if n in NAMES}
        assert results == dict.fromkeys(NAMES, "pass"), (name, found[name]["canaries"])
    # The top-level canaries stay the primary's: the same rounds as engines[0]'s.
    top = {c["name"]: c["ts"] for c in status(rig)["canaries"]}
    assert top == {n: c["ts"] for n, c in verdicts(engines(rig)["low"]).items()}
    assert top != {n: c["ts"] for n, c in verdicts(engines(rig)["high"]).items()}

    # /metrics: the primary's series as with one engine, the side engine's labelled.
    samples = canary_samples(rig)
    assert samples[(("canary", "copy_fidelity"),)] == 0.0
    assert samples[(("canary", "copy_fidelity"), ("engine", "high"))] == 0.0
    assert not any(("engine", "low") in labels for labels in samples)

    # fleetctl canary status: one block per engine, its name first; --json per engine.
    shown = fleetctl(rig, "canary", "status")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    lines = shown.stdout.splitlines()
    assert "engine low" in lines and "engine high" in lines, shown.stdout
    assert lines.index("engine low") < lines.index("engine high")
    assert shown.stdout.count("copy_fidelity") == 2, shown.stdout
    # Provenance per engine: each engine's build is its own, stamping its own verdicts.
    primary_builds = rig.get("/api/v1/builds").json()["builds"]
    side_builds = rig.get("/api/v1/builds?engine=high").json()["builds"]
    assert [b["image"] for b in side_builds] == [SIDE_IMAGE], side_builds
    assert side_builds[0]["current"] and set(side_builds[0]["canaries"]) >= NAMES
    assert all(b["image"] != SIDE_IMAGE for b in primary_builds), primary_builds
    assert rig.get("/api/v1/builds?engine=low").json()["builds"] == primary_builds
    unknown = rig.get("/api/v1/builds?engine=nope")
    assert unknown.status_code == 404 and "engines: low, high" in unknown.text, unknown.text
    shown_builds = fleetctl(rig, "builds", "--engine", "high")
    assert shown_builds.returncode == 0, shown_builds.stdout + shown_builds.stderr
    assert (
        "engine high builds" in shown_builds.stdout and "side-engine@sha256:" in shown_builds.stdout
    )
    # canary run NAME: a round on that engine now, its verdicts its own.
    before_high = {n: c["ts"] for n, c in verdicts(engines(rig)["high"]).items()}
    before_low = {n: c["ts"] for n, c in verdicts(engines(rig)["low"]).items()}
    ran = fleetctl(rig, "canary", "run", "high", "--force")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert {n: c["ts"] for n, c in verdicts(engines(rig)["high"]).items()} != before_high
    assert {n: c["ts"] for n, c in verdicts(engines(rig)["low"]).items()} == before_low
    nope = fleetctl(rig, "canary", "run", "nope")
    assert nope.returncode != 0 and "no engine 'nope' on this rig (engines: low, high)" in (
        nope.stdout + nope.stderr
    ), nope.stdout + nope.stderr
    assert "Traceback" not in nope.stdout + nope.stderr
    as_json = fleetctl(rig, "canary", "status", "--json")
    assert as_json.returncode == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    assert [e["engine"] for e in document["engines"]] == ["low", "high"]
    assert {c["name"] for c in document["engines"][1]["canaries"]} >= NAMES


def test_a_failing_side_engine_is_held_alone_by_its_own_on_fail(rig: Fleetd) -> None:
    wait_until(
        lambda: all(e["state"] == "ready" for e in engines(rig).values()), WAIT_S, "both ready"
    )
    before = engines(rig)
    low_pid = before["low"]["pid"]
    low_rounds = {n: c["ts"] for n, c in verdicts(before["low"]).items()}
    # The side engine's image is rebuilt to corrupt copies; only the side engine restarts.
    rebuilt = rig.post(
        "/api/v1/sim/rebuild", {"image": SIDE_IMAGE, "engine": {"corrupt_identifiers_pct": 60}}
    )
    assert rebuilt.status_code == 200, rebuilt.text
    restarted = fleetctl(rig, "restart", "high", "--timeout", "60")
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr

    # The side engine's round fails its copy canary; on_fail = "hold" stops and holds it.
    def held() -> list[dict[str, Any]]:
        decisions = status(rig)["recovery"]["decisions"] or []
        return [d for d in decisions if d["reason"].startswith("engine high: canary failed")]

    wait_until(held, WAIT_S, "the side engine's on_fail decision")
    assert "copy_fidelity" in held()[0]["reason"], held()
    wait_until(lambda: engines(rig)["high"]["state"] == "stopped", WAIT_S, "the side engine held")
    high = verdicts(engines(rig)["high"])["copy_fidelity"]
    assert "fail" in (high["result"], high.get("last_result")), high
    events = rig.get("/api/v1/events?limit=1000").json()
    failed = [e["message"] for e in events if "canary copy_fidelity: fail" in e["message"]]
    assert failed and all(m.startswith("engine high: ") for m in failed), failed

    # The primary engine: the same run, still ready, its canaries untouched.
    after = engines(rig)
    assert after["low"]["state"] == "ready" and after["low"]["pid"] == low_pid
    assert {n: c["ts"] for n, c in verdicts(after["low"]).items()} == low_rounds
    assert {c["name"]: c["result"] for c in status(rig)["canaries"]} == dict.fromkeys(NAMES, "pass")
    samples = canary_samples(rig)
    assert samples[(("canary", "copy_fidelity"),)] == 0.0
    assert samples[(("canary", "copy_fidelity"), ("engine", "high"))] >= 2.0  # fail or stale
    shown = fleetctl(rig, "canary", "status")
    assert shown.returncode != 0, shown.stdout  # the side engine's canaries count too
