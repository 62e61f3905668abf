"""The engine canaries' part of ``/metrics``: last verdicts, their figures, log signatures.

``cmpfleet_canary_result{canary}`` (0 pass, 1 warn, 2 fail, 3 stale),
``cmpfleet_canary_copy_accuracy_ratio`` and ``cmpfleet_engine_decode_tokens_per_second``
(the copy_fidelity and throughput canaries' figures, left out while stale), and the
non-fatal engine log signatures counted since fleetd started.

Where several engines run (``[serving] run``), each side engine's verdicts and figures
join the same families with an ``engine="NAME"`` label (the profile), as the engine
figures do; the primary engine's series keep their labels of a one-engine rig, so a
dashboard or alert written for one engine reads the same series.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from web.metrics_model import CanaryMetrics, EngineCanaries

# A stale verdict (from before the engine's current run, or the engine not ready) gets
# its own value: it must never read as the pass it once was.
CANARY_RESULT_VALUE = {"pass": 0.0, "warn": 1.0, "fail": 2.0, "stale": 3.0}

# What the canaries' wing answers: the last verdicts, and log signature -> count.
CanaryState = tuple[Sequence[CanaryMetrics], Mapping[str, int]]


def canary_families(
    canaries: Sequence[CanaryMetrics],
    signatures: Mapping[str, int],
    sides: Sequence[EngineCanaries] = (),
) -> Iterator[Metric]:
    """Engine canaries' last verdicts and figures, and the log-signature counters.

    ``canaries``: the primary engine's (no ``engine`` label); ``sides``: each side engine's.
    """
    results = GaugeMetricFamily(
        "cmpfleet_canary_result",
        "Last judged result of each engine canary: 0 pass, 1 warn, 2 fail, 3 stale.",
        labels=["canary"],
    )
    accuracy = GaugeMetricFamily(
        "cmpfleet_canary_copy_accuracy_ratio",
        "Share of identifiers the engine copied back exactly (copy_fidelity canary).",
    )
    decode = GaugeMetricFamily(
        "cmpfleet_engine_decode_tokens_per_second",
        "Single-stream decode speed measured by the throughput canary.",
    )
    engines: list[tuple[dict[str, str], Sequence[CanaryMetrics]]] = [({}, canaries)]
    engines += [({"engine": side.engine}, side.canaries) for side in sides]
    for labels, verdicts in engines:
        for canary in verdicts:
            if canary.result in CANARY_RESULT_VALUE:
                value = CANARY_RESULT_VALUE[canary.result]
                _add(results, {"canary": canary.name, **labels}, value)
            if canary.result == "stale":
                continue  # its figure judged an engine run that no longer serves
            if canary.figure is not None and canary.name == "copy_fidelity":
                _add(accuracy, labels, canary.figure)
            if canary.figure is not None and canary.name == "throughput":
                _add(decode, labels, canary.figure)
    counted = CounterMetricFamily(
        "cmpfleet_engine_log_signature",
        "Non-fatal engine log signatures seen since fleetd started.",
        labels=["signature"],
    )
    for name, count in sorted(signatures.items()):
        counted.add_metric([name], float(count))
    yield from (results, accuracy, decode, counted)


def _add(family: Metric, labels: dict[str, str], value: float) -> None:
    """One sample with these labels: a side engine's adds ``engine`` to the family's own."""
    family.samples.append(Sample(family.name, labels, value))


class CanariesCollector(Collector):
    """The canaries' families at each scrape (``None``: no canaries configured, empty).

    ``sides``: each side engine's canaries (none with one engine).
    """

    def __init__(
        self,
        canaries: Callable[[], CanaryState] | None,
        sides: Callable[[], Sequence[EngineCanaries]] = tuple,
    ) -> None:
        self._canaries = canaries
        self._sides = sides

    def collect(self) -> Iterator[Metric]:
        """Every canary family, from one answer of the canaries' wing."""
        canaries, signatures = ((), {}) if self._canaries is None else self._canaries()
        yield from canary_families(canaries, signatures, self._sides())
