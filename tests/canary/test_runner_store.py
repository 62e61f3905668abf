"""The runner's view of its stored results: every canary listed, a skipped round keeps the verdict.

A real SQLite store in a temp dir and a scripted engine at the ``EngineApi`` boundary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from daemon.canaries.runner import CanaryRunner
from daemon.store import Store
from serving.canary.settings import CanarySettings
from serving.canary.suite import Expectations
from serving.canary.throughput import StreamTiming
from serving.canary.toolcall import TOOL_NAME


class ScriptedEngine:
    """Answers every canary request; ``running`` requests are in flight."""

    def __init__(self) -> None:
        self.running = 0

    def chat(self, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if body.get("tools"):
            call = {
                "type": "function",
                "function": {"name": TOOL_NAME, "arguments": '{"path": "/x"}'},
            }
            message: dict[str, Any] = {"content": None, "tool_calls": [call]}
        elif body.get("chat_template_kwargs"):
            message = {"content": "yes", "reasoning_content": "17 has no divisors"}
        else:
            prompt = body["messages"][0]["content"]
            listed = prompt.split("BEGIN LIST\n", 1)[1].split("\nEND LIST", 1)[0]
            message = {"content": listed}
        return {"choices": [{"message": message}]}

    def stream_timing(self, body: dict[str, Any], timeout_s: float) -> StreamTiming:
        return StreamTiming(1000, 101, 0.2, 1.0)

    def running_requests(self, timeout_s: float) -> int | None:
        return self.running

    def close(self) -> None:
        pass


READY_SINCE = "2026-09-29T13:00:00+00:00"  # the engine's current run, before every round


def runner(
    tmp_path: Path, engine: ScriptedEngine, serving: dict[str, Any] | None = None
) -> CanaryRunner:
    store = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    serving = serving or {"state": "ready", "url": "http://engine", "pid": 1, "since": READY_SINCE}
    return CanaryRunner(
        CanarySettings(busy_running_requests=0),
        store,
        lambda: serving,
        "m",
        Expectations(100.0, 5000.0),
        lambda: False,
        api_factory=lambda url, model: engine,
    )


def test_before_any_round_every_canary_is_listed_as_not_run(tmp_path: Path) -> None:
    entries = runner(tmp_path, ScriptedEngine()).status_entries()
    assert [(e["name"], e["result"], e["ts"]) for e in entries] == [
        ("copy_fidelity", "skipped", None),
        ("tool_calls", "skipped", None),
        ("reasoning_field", "skipped", None),
        ("throughput", "skipped", None),
    ]


def test_a_busy_round_keeps_the_last_verdict_and_says_when_it_was_skipped(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    canaries = runner(tmp_path, engine)
    first = canaries.run_now()
    assert first["exit_code"] == 0, first
    engine.running = 1
    second = canaries.run_now()
    assert second["exit_code"] == 1
    assert {c["result"] for c in second["canaries"]} == {"skipped"}
    entries = {e["name"]: e for e in canaries.status_entries()}
    assert entries["copy_fidelity"]["result"] == "pass"
    assert "engine busy" in entries["copy_fidelity"]["last_skipped_reason"]
    assert [row.result for row in canaries.judged()] == ["pass"] * 4


def test_a_verdict_from_before_the_current_run_or_with_the_engine_down_is_stale(
    tmp_path: Path,
) -> None:
    serving: dict[str, Any] = {"state": "ready", "url": "http://e", "pid": 1, "since": READY_SINCE}
    canaries = runner(tmp_path, ScriptedEngine(), serving)
    assert canaries.run_now()["exit_code"] == 0
    assert {e["result"] for e in canaries.status_entries()} == {"pass"}
    serving.update(state="stopped", pid=None)  # an Xid stopped it
    entries = canaries.status_entries()
    assert {e["result"] for e in entries} == {"stale"}
    assert {e["last_result"] for e in entries} == {"pass"}
    assert {canaries.current_result(row) for row in canaries.judged()} == {"stale"}
    serving.update(state="ready", pid=2, since="2099-01-01T00:00:00+00:00")  # a new run
    assert {e["result"] for e in canaries.status_entries()} == {"stale"}


class StoppedMidRound(ScriptedEngine):
    """The run ends during the throughput canary (``ends_as``: the status then); a short stream."""

    def __init__(self, serving: dict[str, Any], ends_as: dict[str, Any] | None = None) -> None:
        super().__init__()
        self._serving = serving
        self._ends_as = {"state": "stopping"} if ends_as is None else ends_as

    def stream_timing(self, body: dict[str, Any], timeout_s: float) -> StreamTiming:
        self._serving.update(self._ends_as)
        return StreamTiming(1000, 3, 0.2, 1.0)  # 3 tokens of 101: far under its pace


def test_a_round_cut_by_a_stop_fails_nothing_and_its_passes_stand(tmp_path: Path) -> None:
    """The build's record keeps no fail the stop caused; what passed before the stop stands."""
    serving: dict[str, Any] = {"state": "ready", "url": "http://e", "pid": 1, "since": READY_SINCE}
    canaries = runner(tmp_path, StoppedMidRound(serving), serving)
    answer = canaries.run_now()
    results = {c["name"]: c for c in answer["canaries"]}
    assert results["throughput"]["result"] == "skipped"
    said = results["throughput"]["message"]
    assert "the engine run stopped during the round (now stopping)" in said
    assert {results[n]["result"] for n in ("copy_fidelity", "tool_calls")} == {"pass"}
    assert "throughput" not in {row.name for row in canaries.judged()}


def test_the_same_short_stream_on_a_run_that_goes_on_is_judged(tmp_path: Path) -> None:
    serving: dict[str, Any] = {"state": "ready", "url": "http://e", "pid": 1, "since": READY_SINCE}
    canaries = runner(tmp_path, StoppedMidRound(serving, ends_as={}), serving)
    answer = canaries.run_now()
    throughput = {c["name"]: c for c in answer["canaries"]}["throughput"]
    assert throughput["result"] == "warn" and "slow: decode 2.0 tok/s" in throughput["message"]


def test_a_crash_under_the_round_is_not_a_stop_its_misses_stand(tmp_path: Path) -> None:
    """An engine that died under a canary is what the canary is for: nothing is skipped."""
    serving: dict[str, Any] = {"state": "ready", "url": "http://e", "pid": 1, "since": READY_SINCE}
    crashed = {"state": "backoff", "pid": None, "crash_class": "cuda_illegal_address"}
    canaries = runner(tmp_path, StoppedMidRound(serving, ends_as=crashed), serving)
    answer = canaries.run_now()
    assert {c["name"]: c["result"] for c in answer["canaries"]}["throughput"] == "warn"
    serving.update(state="ready", pid=2, since="2099-01-01T00:00:00+00:00")
    restarted = {"state": "starting", "pid": 3, "crash_class": "cuda_illegal_address"}
    (tmp_path / "again").mkdir()
    again = runner(tmp_path / "again", StoppedMidRound(serving, ends_as=restarted), serving)
    assert {c["name"]: c["result"] for c in again.run_now()["canaries"]}["throughput"] == "warn"
