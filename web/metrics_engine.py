"""The engine's part of ``/metrics``: its state, restarts, throughput and its own figures.

``cmpfleet_serving_state{state}``, ``cmpfleet_serving_restarts_total`` and
``cmpfleet_serving_generation_tokens_per_second``, then what fleetd reads of the engine's
vLLM metrics (``serving.runtime.engine_metrics``), re-exported under cmpfleet's names so
one scrape of fleetd has the rig and its engine: one family per row of
``serving.runtime.engine_figures.FIGURES`` with a metric (latency p50/p95 over the
window, speculative decoding, the prefix cache, requests, KV-cache use as a ratio,
preemptions since the engine started: a counter that starts over with the engine, which
``rate()`` handles). Unknown figures are left out.

Where several engines run (``[serving] run``), each figure carries ``engine="NAME"`` (its
profile), one sample per engine, and two families give each engine's state and restarts
(``cmpfleet_serving_engine_state``, ``cmpfleet_serving_engine_restarts``); the unlabelled
``cmpfleet_serving_*`` families stay the first engine's. One engine: no label, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from serving.runtime.engine_figures import FIGURES, FigureKind
from serving.runtime.states import ServingState, ServingStatus
from web.metrics_model import EngineSeries

Family = GaugeMetricFamily | CounterMetricFamily


def _family(name: str, help_text: str, kind: FigureKind, labels: tuple[str, ...] = ()) -> Family:
    if kind is FigureKind.COUNTER:
        return CounterMetricFamily(name, help_text, labels=labels)
    return GaugeMetricFamily(name, help_text, labels=labels)


def engine_metrics(figures: Mapping[str, float | None]) -> Iterator[Metric]:
    """The engine's figure families (each present, empty when the engine says nothing)."""
    for figure in FIGURES:
        metric = figure.metric
        if metric is None:
            continue
        family = _family(metric.name, metric.help, metric.kind)
        value = figures.get(figure.key)
        if value is not None:
            family.add_metric([], float(value) * metric.scale)
        yield family


def several_engines(engines: Sequence[EngineSeries]) -> Iterator[Metric]:
    """The figure families labelled by engine, and each engine's state and restarts."""
    for figure in FIGURES:
        metric = figure.metric
        if metric is None:
            continue
        family = _family(metric.name, metric.help, metric.kind, ("engine",))
        for engine in engines:
            value = engine.figures.get(figure.key)
            if value is not None:
                family.add_metric([engine.name], float(value) * metric.scale)
        yield family
    states = _family(
        "cmpfleet_serving_engine_state",
        "1 for each engine's current state (several engines).",
        FigureKind.GAUGE,
        ("engine", "state"),
    )
    restarts = _family(
        "cmpfleet_serving_engine_restarts",
        "Each engine's restarts (several engines; a running total).",
        FigureKind.COUNTER,
        ("engine",),
    )
    for engine in engines:
        for each in ServingState:
            states.add_metric([engine.name, each.value], 1.0 if each is engine.state else 0.0)
        restarts.add_metric([engine.name], float(engine.restarts))
    yield states
    yield restarts


def engine_families(
    status: ServingStatus | None, engines: Sequence[EngineSeries] = ()
) -> Iterator[Metric]:
    """Every engine family of one status (``None``: no engine configured, stopped).

    ``engines``: every engine when several run (the figures then carry their label).
    """
    state = ServingState.STOPPED if status is None else status.state
    serving = _family("cmpfleet_serving_state", "1 for the engine's current state.",
                      FigureKind.GAUGE, ("state",))  # fmt: skip
    for each in ServingState:
        serving.add_metric([each.value], 1.0 if each is state else 0.0)
    yield serving
    restarts = _family(
        "cmpfleet_serving_restarts",
        "Engine restarts (a running total that backoff resets never zero).",
        FigureKind.COUNTER,
    )
    restarts.add_metric([], float(0 if status is None else status.restarts))
    yield restarts
    tokens = _family(
        "cmpfleet_serving_generation_tokens_per_second",
        "Generation throughput the engine reports.",
        FigureKind.GAUGE,
    )
    metrics = None if status is None else status.metrics
    if metrics is not None and metrics.generation_tokens_per_s is not None:
        tokens.add_metric([], float(metrics.generation_tokens_per_s))
    yield tokens
    if engines:
        yield from several_engines(engines)
        return
    figures: dict[str, float | None] = {}
    if metrics is not None:
        figures = {k: v for k, v in metrics.as_dict().items() if not isinstance(v, str)}
    yield from engine_metrics(figures)


class EngineCollector(Collector):
    """The engine's families at each scrape, from its supervisor's status (memory only).

    ``engines``: every engine when several run (``daemon.engine.fleet.engine_series``;
    empty with one engine).
    """

    def __init__(
        self,
        status: Callable[[], ServingStatus | None],
        engines: Callable[[], Sequence[EngineSeries]] = tuple,
    ) -> None:
        self._status = status
        self._engines = engines

    def collect(self) -> Iterator[Metric]:
        """Every engine family, from one status (and every engine's when several run)."""
        yield from engine_families(self._status(), self._engines())
