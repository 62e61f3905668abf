"""``/metrics`` with several engines (issue 42): each engine figure carries the engine's
profile as its ``engine`` label, one sample per engine; each engine's state and restarts
are exported; an unknown figure is left out for that engine only."""

from __future__ import annotations

from serving.runtime.states import ServingState
from web.metrics_engine import EngineCollector, several_engines
from web.metrics_model import EngineSeries


def test_each_engine_figure_carries_its_engine_label() -> None:
    engines = (
        EngineSeries("dsv4", ServingState.READY, 2, {"requests_running": 3.0, "ttft_p95_s": 1.5}),
        EngineSeries("qwen", ServingState.BACKOFF, 5, {"requests_running": 1.0}),
    )
    families = {family.name: family for family in several_engines(engines)}
    running = families["cmpfleet_engine_requests_running"].samples
    assert {(s.labels["engine"], s.value) for s in running} == {("dsv4", 3.0), ("qwen", 1.0)}
    ttft = families["cmpfleet_engine_ttft_p95_seconds"].samples
    assert [(s.labels["engine"], s.value) for s in ttft] == [("dsv4", 1.5)]
    states = families["cmpfleet_serving_engine_state"].samples
    on = {(s.labels["engine"], s.labels["state"]) for s in states if s.value == 1.0}
    assert on == {("dsv4", "ready"), ("qwen", "backoff")}
    restarts = families["cmpfleet_serving_engine_restarts"].samples
    assert {(s.labels["engine"], s.value) for s in restarts} == {("dsv4", 2.0), ("qwen", 5.0)}


def test_the_engine_collector_labels_only_when_several_engines_run() -> None:
    engines = (
        EngineSeries("dsv4", ServingState.READY, 0, {"requests_running": 3.0}),
        EngineSeries("qwen", ServingState.READY, 1, {"requests_running": 1.0}),
    )
    several = {f.name: f for f in EngineCollector(lambda: None, lambda: engines).collect()}
    running = several["cmpfleet_engine_requests_running"].samples
    assert {s.labels["engine"] for s in running} == {"dsv4", "qwen"}
    assert "cmpfleet_serving_engine_state" in several
    alone = {f.name: f for f in EngineCollector(lambda: None).collect()}
    assert "cmpfleet_serving_engine_state" not in alone
    assert all(not s.labels for s in alone["cmpfleet_serving_restarts"].samples)
