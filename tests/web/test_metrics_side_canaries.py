"""``/metrics`` canaries with several engines (issue 42): a side engine's verdicts and
figures carry ``engine="NAME"``; the primary engine's series keep their one-engine labels;
a side engine's stale verdict keeps its value and drops its figures, as the primary's."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.support.metrics import exposition
from web.metrics_canaries import CanariesCollector
from web.metrics_model import CanaryMetrics, EngineCanaries

PRIMARY = (
    CanaryMetrics("copy_fidelity", "pass", 1.0),
    CanaryMetrics("throughput", "pass", 31.0),
)
SIDES = (
    EngineCanaries(
        "high",
        (CanaryMetrics("copy_fidelity", "fail", 0.4), CanaryMetrics("throughput", "stale", 9.0)),
    ),
)


def samples(page: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(page)
        for sample in family.samples
    }


def test_side_engines_series_carry_their_engine_label_and_the_primarys_stay() -> None:
    page = exposition(CanariesCollector(lambda: (PRIMARY, {}), lambda: SIDES))
    found = samples(page)
    canary = "cmpfleet_canary_result"
    assert found[(canary, (("canary", "copy_fidelity"),))] == 0.0
    assert found[(canary, (("canary", "copy_fidelity"), ("engine", "high")))] == 2.0
    assert found[(canary, (("canary", "throughput"), ("engine", "high")))] == 3.0
    assert found[("cmpfleet_canary_copy_accuracy_ratio", ())] == 1.0
    assert found[("cmpfleet_canary_copy_accuracy_ratio", (("engine", "high"),))] == 0.4
    decode = "cmpfleet_engine_decode_tokens_per_second"
    assert found[(decode, ())] == 31.0
    assert (decode, (("engine", "high"),)) not in found  # stale: its figure judged another run


def test_with_one_engine_the_series_are_what_they_were() -> None:
    alone = exposition(CanariesCollector(lambda: (PRIMARY, {})))
    assert alone == exposition(CanariesCollector(lambda: (PRIMARY, {}), tuple))
    assert "engine=" not in alone
    assert 'cmpfleet_canary_result{canary="copy_fidelity"} 0.0' in alone
