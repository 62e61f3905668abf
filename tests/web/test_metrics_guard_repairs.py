"""The guard's repairs and fair queue on ``/metrics``: by key and repair, depth and wait."""

from __future__ import annotations

from web.metrics_guard import guard_metrics
from web.metrics_model import GuardMetrics


def test_repairs_by_key_and_the_queue_are_exported() -> None:
    guard = GuardMetrics(
        up=True,
        restarts=0,
        counters={"loops_cut": 2, "queue_refused": 1},
        signs={},
        tokens={},
        sessions=1,
        deepest_session_tokens=None,
        repairs={("laptop", "history"): 3, ("ci", "salvaged"): 1},
        queue={"depth": 2, "running": 8, "waited": 5, "wait_s_total": 1.5, "wait_s_max": 0.9},
    )
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in guard_metrics(guard)
        for sample in family.samples
    }
    assert (
        samples[("cmpfleet_guard_repairs_total", (("key", "laptop"), ("repair", "history")))] == 3
    )
    assert samples[("cmpfleet_guard_repairs_total", (("key", "ci"), ("repair", "salvaged")))] == 1
    assert samples[("cmpfleet_guard_loops_cut_total", ())] == 2
    assert samples[("cmpfleet_guard_queue_refused_total", ())] == 1
    assert samples[("cmpfleet_guard_queue_depth", ())] == 2
    assert samples[("cmpfleet_guard_queue_wait_seconds_total", ())] == 1.5
    assert samples[("cmpfleet_guard_queue_wait_max_seconds", ())] == 0.9
