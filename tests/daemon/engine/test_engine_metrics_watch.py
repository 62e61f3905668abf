"""The engine's own metrics against their 24 h median: alarms, events, alerts, /metrics names."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from daemon.alerts.rules import event_signals
from daemon.engine.metrics_watch import EngineMetricsWatch
from daemon.store import Store
from hwcheck.model import EventKind
from serving.runtime.engine_alarms import judge_acceptance, judge_ttft
from serving.runtime.engine_metrics import EngineFigures
from serving.runtime.metrics import EngineMetrics
from serving.runtime.states import ServingState, ServingStatus
from serving.settings import ServingSettings
from tests.support.external import require_program
from tests.support.metrics import every_collector
from tests.support.metrics import exposition as collectors_exposition

T0 = datetime(2026, 12, 4, tzinfo=UTC)


def test_alarms_judge_against_the_median_once_there_is_one() -> None:
    assert judge_acceptance(0.2, [0.7] * 3, 0.6, min_samples=4) is None  # no normal yet
    collapsed = judge_acceptance(0.2, [0.7, 0.72, 0.69, 0.71], 0.6, 4)
    assert collapsed is not None and collapsed.firing
    assert "below 60% of its 24 h median 70%" in collapsed.message
    fine = judge_acceptance(0.6, [0.7] * 4, 0.6, 4)
    assert fine is not None and not fine.firing
    slow = judge_ttft(3.1, [1.0] * 5, 3.0, 4)
    assert slow is not None and slow.firing and "3.1x" in slow.message
    assert judge_ttft(None, [1.0] * 5, 3.0, 4) is None


def metrics(
    at: datetime, acceptance: float | None, ttft_p95_s: float | None = 0.5
) -> EngineMetrics:
    figures = EngineFigures(ttft_p95_s=ttft_p95_s, spec_acceptance_ratio=acceptance)
    return EngineMetrics(None, 0.0, 0.0, 0.0, at, figures)


def test_an_acceptance_collapse_is_an_event_that_alerts_and_resolves(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    settings = ServingSettings(metrics_baseline_min_samples=4)
    for minute in range(5):  # yesterday's normal, stored: a restarted fleetd keeps it
        store.record_engine_sample(
            T0 + timedelta(minutes=minute),
            figures={"spec_acceptance_ratio": 0.7, "ttft_p95_s": 0.5},
        )
    watch = EngineMetricsWatch(store, settings)
    watch.load(T0 + timedelta(minutes=10))
    at = T0 + timedelta(minutes=10)
    assert watch.observe(metrics(at, 0.7)) == []  # normal: nothing changes
    assert watch.observe(metrics(at, 0.1)) == []  # the same sample twice is judged once
    (fired,) = watch.observe(metrics(at + timedelta(seconds=15), 0.1))
    assert fired.firing and fired.metric == "spec_acceptance"
    assert watch.observe(metrics(at + timedelta(seconds=30), 0.1)) == []  # still firing: no news
    (back,) = watch.observe(metrics(at + timedelta(seconds=45), 0.69))
    assert not back.firing
    events = [e for e in store.list_events(limit=10) if e.kind is EventKind.SERVING]
    assert [bool((e.details or {}).get("firing")) for e in events] == [False, True]
    (fire,) = event_signals(events[1])
    assert fire.fire and fire.fingerprint == "engine_metric:spec_acceptance"
    assert fire.labels["alertname"] == "SpecAcceptanceCollapsed"
    assert "speculative decoding acceptance 10%" in fire.summary
    (resolve,) = event_signals(events[0])
    assert not resolve.fire and resolve.fingerprint == "engine_metric:spec_acceptance"
    store.close()


def ready(engine_metrics: EngineMetrics | None) -> ServingStatus:
    return ServingStatus(
        ServingState.READY, 4242, 0, T0, "http://127.0.0.1:8000", metrics=engine_metrics
    )


def exposition(status: ServingStatus | None) -> str:
    return collectors_exposition(*every_collector(engine_status=status))


def test_the_engines_figures_are_exported_under_cmpfleet_names() -> None:
    figures = replace(
        metrics(T0, 0.65, 1.25).figures, ttft_p50_s=0.4, preemptions_total=3.0,
        prefix_cache_hit_ratio=0.5, spec_mean_accepted_tokens=3.7,
    )  # fmt: skip
    text = exposition(ready(EngineMetrics(None, 0.0, 0.0, 25.0, T0, figures)))
    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples["cmpfleet_engine_ttft_p95_seconds"] == 1.25
    assert samples["cmpfleet_engine_ttft_p50_seconds"] == 0.4
    assert samples["cmpfleet_engine_spec_decode_acceptance_ratio"] == 0.65
    assert samples["cmpfleet_engine_spec_decode_mean_accepted_tokens"] == 3.7
    assert samples["cmpfleet_engine_prefix_cache_hit_ratio"] == 0.5
    assert samples["cmpfleet_engine_kv_cache_usage_ratio"] == 0.25
    assert samples["cmpfleet_engine_preemptions_total"] == 3.0
    assert "cmpfleet_engine_inter_token_latency_p95_seconds" not in samples  # unknown: left out
    unknown = [s.name for f in text_string_to_metric_families(exposition(None)) for s in f.samples]
    assert not [name for name in unknown if name.startswith("cmpfleet_engine_")]


@pytest.mark.external
def test_promtool_accepts_the_engine_families() -> None:
    promtool = require_program("promtool", "prometheus")
    figures = replace(metrics(T0, 0.65, 1.25).figures, preemptions_total=3.0, itl_p95_s=0.02)
    checked = subprocess.run(
        [promtool, "check", "metrics"],
        input=exposition(ready(EngineMetrics(12.5, 1.0, 0.0, 30.0, T0, figures))),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.strip() == "", checked.stdout  # no lint warnings either
