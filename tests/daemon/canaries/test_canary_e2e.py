"""Engine canaries under a live simulated fleetd: scheduled round, fleetctl, busy, signatures.

Two daemons for the module (healthy with signature lines, and ``engine-corrupt``), each
with the real simulated engine as its child and small canary sizes so a round takes a
few seconds at the simulated engine's default pace.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=25)

HEALTHY = Path(__file__).resolve().parents[3] / "hwcheck" / "sim" / "scenarios" / "healthy.toml"
NAMES = {"copy_fidelity", "tool_calls", "reasoning_field", "throughput"}
CANARY_CONFIG = """
[serving]
probe_interval_s = 0.3
metrics_interval_s = 0.5
[canary]
interval_s = 3600
busy_running_requests = 0
timeout_s = 20
identifiers = 40
throughput_prompt_tokens = 400
throughput_max_tokens = 16
"""
SIGNATURE_LINES = """
[engine]
log_lines = [
  { after_s = 0.2, text = "WARNING 12-02 10:12:01 [rejection_sampler.py:412] draft token id 129281 out of range" },
  { after_s = 0.2, text = "WARNING 12-02 10:13:10 [scheduler.py:1210] repetition tripwire fired for chatcmpl-7" },
  { after_s = 0.3, text = "INFO 12-02 10:13:10 [scheduler.py:1245] nudge spliced into chatcmpl-7" },
  { after_s = 0.3, text = "WIDGET 12-02 my fork's own line" },
  { after_s = 0.3, text = "GADGET 12-02 prompt text that must not leave the log" },
]
"""
OWN_SIGNATURE = """
[[canary.log_signatures]]
name = "widget"
regex = "^WIDGET "

[[serving.log_signatures]]
name = "gadget"
pattern = "^GADGET "
severity = "warning"
"""


def start(tmp: Path, scenario: str, config_text: str) -> Fleetd:
    config = tmp / "fleet.toml"
    config.write_text(config_text)
    daemon = start_fleetd(tmp, tmp / "state", simulate=scenario, config=config)
    try:
        wait_until(lambda: status(daemon)["serving"]["state"] == "ready", 60, "engine ready")
    except AssertionError:
        stop_all([daemon])
        raise
    return daemon


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("canary-healthy")
    scenario = tmp / "healthy-signatures.toml"
    scenario.write_text(HEALTHY.read_text() + SIGNATURE_LINES)
    daemon = start(tmp, str(scenario), CANARY_CONFIG + OWN_SIGNATURE)
    try:
        yield daemon
    finally:
        stop_all([daemon])


@pytest.fixture(scope="module")
def corrupt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    daemon = start(tmp_path_factory.mktemp("canary-corrupt"), "engine-corrupt", CANARY_CONFIG)
    try:
        yield daemon
    finally:
        stop_all([daemon])


def fleetctl(daemon: Fleetd, *args: str) -> subprocess.CompletedProcess[str]:
    return run_fleetctl_here(
        "--url", daemon.url, *args, env={"CMPFLEET_STATE_DIR": str(daemon.state_dir)}
    )


def status(daemon: Fleetd) -> dict[str, Any]:
    document: dict[str, Any] = daemon.get("/api/v1/status").json()
    return document


def canaries(daemon: Fleetd) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in status(daemon)["canaries"]}


def judged(daemon: Fleetd) -> bool:
    """Every canary has a result of a round (before one, each is listed as skipped)."""
    found = canaries(daemon)
    return set(found) == NAMES and all(c["ts"] is not None for c in found.values())


def test_the_round_after_ready_passes_every_canary_and_shows_in_status(healthy: Fleetd) -> None:
    wait_until(lambda: judged(healthy), 60, "the after-ready round")
    found = canaries(healthy)
    assert {name: c["result"] for name, c in found.items()} == dict.fromkeys(NAMES, "pass"), found
    for canary in found.values():
        assert set(canary) >= {"name", "result", "figure", "advice", "ts"}
    assert found["copy_fidelity"]["figure"] == 1.0
    assert found["throughput"]["figure"] > 0


def test_fleetctl_canary_run_exits_0_when_all_pass(healthy: Fleetd) -> None:
    ran = fleetctl(healthy, "canary", "run", "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    document = json.loads(ran.stdout)
    assert {c["name"]: c["result"] for c in document["canaries"]} == dict.fromkeys(NAMES, "pass")
    shown = fleetctl(healthy, "canary", "status")
    assert shown.returncode == 0, shown.stderr
    assert "copy_fidelity" in shown.stdout and "pass" in shown.stdout


def test_canary_run_needs_the_token(healthy: Fleetd) -> None:
    assert healthy.post("/api/v1/canary/run", token=None).status_code == 401
    assert healthy.get("/api/v1/canary").status_code == 200


def test_log_signatures_are_counted_per_hour(healthy: Fleetd) -> None:
    def counts() -> dict[str, int]:
        return {s["name"]: s["this_hour"] for s in status(healthy)["log_signatures"]}

    wait_until(lambda: counts().get("widget") == 1, 30, "the owner's signature counted")
    found = counts()
    assert found["out_of_vocab"] == 1
    assert found["repetition_tripwire"] == 2  # the tripwire and its nudge
    assert found["grammar_rejection"] == 0
    overview = healthy.get("/api/v1/canary").json()
    assert {s["name"]: s["last_24h"] for s in overview["log_signatures"]}["widget"] == 1
    scraped = healthy.get("/metrics").text
    assert 'cmpfleet_engine_log_signature_total{signature="repetition_tripwire"} 2.0' in scraped


def test_a_serving_signature_adds_to_the_built_ins_and_its_severity_is_news(
    healthy: Fleetd,
) -> None:
    def entry() -> dict[str, Any] | None:
        found = [s for s in status(healthy)["log_signatures"] if s["name"] == "gadget"]
        return found[0] if found and found[0]["this_hour"] else None

    wait_until(lambda: entry() is not None, 30, "the [[serving.log_signatures]] one counted")
    assert entry() == {**(entry() or {}), "this_hour": 1, "severity": "warning"}
    events = healthy.get("/api/v1/events?kind=serving&limit=100").json()
    (seen,) = [e for e in events if "'gadget'" in e["message"]]
    assert seen["severity"] == "warning"
    assert "prompt text" not in seen["message"]  # the signature is named, the line is not


def test_a_busy_engine_skips_the_round_and_keeps_the_last_verdict(healthy: Fleetd) -> None:
    wait_until(lambda: judged(healthy), 60, "a judged round first")
    engine_url = status(healthy)["serving"]["url"]
    body = {
        "model": "dsv4s",
        "messages": [{"role": "user", "content": "go"}],
        "max_tokens": 600,
        "ignore_eos": True,
        "stream": True,
    }
    opened = threading.Event()

    def hold() -> None:
        with httpx.stream("POST", f"{engine_url}/v1/chat/completions", json=body, timeout=60) as r:
            for _ in r.iter_lines():
                opened.set()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert opened.wait(30), "the long request did not start"
    ran = fleetctl(healthy, "canary", "run", "--json")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    results = json.loads(ran.stdout)["canaries"]
    assert {c["result"] for c in results} == {"skipped"}
    assert "engine busy" in results[0]["message"]
    kept = canaries(healthy)["copy_fidelity"]
    assert kept["result"] == "pass"
    assert "engine busy" in kept["last_skipped_reason"]


def test_engine_corrupt_fails_copy_fidelity_and_tool_calls_with_exit_2(corrupt: Fleetd) -> None:
    ran = fleetctl(corrupt, "canary", "run", "--json")
    assert ran.returncode == 2, ran.stdout + ran.stderr
    found = {c["name"]: c for c in json.loads(ran.stdout)["canaries"]}
    assert found["copy_fidelity"]["result"] == "fail"
    assert found["copy_fidelity"]["figure"] == pytest.approx(0.8)
    assert "token corruption" in found["copy_fidelity"]["advice"]
    assert found["tool_calls"]["result"] == "fail"
    assert "--tool-call-parser" in found["tool_calls"]["advice"]
    human = fleetctl(corrupt, "canary", "status")
    assert human.returncode == 2
    assert "fail" in human.stdout
    scraped = corrupt.get("/metrics").text
    assert 'cmpfleet_canary_result{canary="copy_fidelity"} 2.0' in scraped
    assert 'cmpfleet_canary_result{canary="reasoning_field"} 0.0' in scraped
    assert "cmpfleet_canary_copy_accuracy_ratio 0.8" in scraped
    assert "cmpfleet_engine_decode_tokens_per_second " in scraped
    events = fleetctl(corrupt, "events", "--kind", "canary", "--json")
    messages = [e["message"] for e in json.loads(events.stdout)]
    assert any(m.startswith("canary copy_fidelity: fail") for m in messages), messages
    assert any(m.startswith("canary tool_calls: fail") for m in messages), messages


def engine_output(daemon: Fleetd) -> dict[str, Any]:
    document = status(daemon)
    found = [c for c in document["checks"] if c["id"] == "engine_output"]
    assert len(found) == 1, document["checks"]
    return {**found[0], "overall": document["overall"]}


def test_failed_canaries_make_the_rig_critical_without_blocking_a_restart(corrupt: Fleetd) -> None:
    """The silent failure made loud: status, its exit code and the checks list say it."""

    def both_said() -> bool:  # a round's verdicts reach the check one by one
        check = engine_output(corrupt)
        return check["severity"] == "critical" and "tool_calls fail" in check["message"]

    wait_until(both_said, 60, "engine_output naming both failed canaries")
    check = engine_output(corrupt)
    assert check["overall"] == "critical"
    assert check["card"] is None
    assert "copy_fidelity fail (80%)" in check["message"]
    assert "tool_calls fail" in check["message"]
    assert "token corruption" in check["remedy"]
    assert fleetctl(corrupt, "status").returncode == 2
    # A person restarts the engine to test a fix: the engine's own verdict never refuses it.
    restarted = fleetctl(corrupt, "restart")
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    # The new run is not blamed for the old one's verdict until its own round judges it.
    wait_until(lambda: status(corrupt)["serving"]["state"] == "ready", 60, "engine ready again")
    wait_until(lambda: engine_output(corrupt)["severity"] == "critical", 60, "judged again")


def test_passing_canaries_leave_the_rig_ok(healthy: Fleetd) -> None:
    wait_until(lambda: judged(healthy), 60, "the after-ready round")
    wait_until(lambda: engine_output(healthy)["severity"] == "ok", 30, "engine_output ok")
    check = engine_output(healthy)
    assert check["overall"] == "ok"
    assert check["message"] == "4 canaries pass on the serving engine"
