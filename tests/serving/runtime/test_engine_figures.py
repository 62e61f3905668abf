"""Each engine figure is declared once (``serving.runtime.engine_figures``) and reaches
the store and ``/metrics`` from its row: a stored figure round-trips through an engine
sample, an exported one is on the exposition, a new ``EngineFigures`` field without a
row fails here.
"""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client.core import Metric

from daemon.store import Store
from daemon.store.models import EngineSample
from serving.runtime.engine_figures import FIGURES, STORED_FIGURES, EngineFigure, FigureKind
from serving.runtime.engine_metrics import EngineFigures
from serving.runtime.metrics import EngineMetrics
from web.metrics_engine import engine_metrics

T0 = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)
LOAD_COLUMNS = {"ts", "tokens_per_s", "requests_running", "requests_waiting", "kv_cache_usage_pct"}


def test_every_figure_has_one_row_and_is_a_key_of_the_engine_metrics() -> None:
    keys = [figure.key for figure in FIGURES]
    assert len(keys) == len(set(keys)), "a figure declared twice"
    shown = EngineMetrics(None, None, None, None, T0).as_dict()
    assert set(keys) == set(shown) - {"ts", "generation_tokens_per_s"}
    assert {field.name for field in fields(EngineFigures)} <= set(keys)


def test_the_stored_figures_are_the_engine_samples_figure_columns() -> None:
    columns = {column.name for column in EngineSample.__table__.columns}
    assert set(STORED_FIGURES) == columns - LOAD_COLUMNS


def test_each_stored_figure_round_trips(tmp_path: Path) -> None:
    values = {name: float(at + 2) / 8 for at, name in enumerate(STORED_FIGURES)}
    store = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    try:
        store.record_engine_sample(T0, tokens_per_s=40.0, figures=values)
        (row,) = store.list_engine_samples(T0, T0.replace(hour=13))
    finally:
        store.close()
    assert {name: getattr(row.figures, name) for name in STORED_FIGURES} == values
    assert {name: row.to_dict()[name] for name in STORED_FIGURES} == values


def _sample_value(families: list[Metric], name: str) -> float | None:
    for family in families:
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    return None


@pytest.mark.parametrize("figure", [f for f in FIGURES if f.metric], ids=lambda f: f.key)
def test_an_exported_figure_is_on_the_exposition_in_its_base_unit(figure: EngineFigure) -> None:
    metric = figure.metric
    assert metric is not None
    name = f"{metric.name}_total" if metric.kind is FigureKind.COUNTER else metric.name
    families = list(engine_metrics({figure.key: 12.5}))
    assert _sample_value(families, name) == pytest.approx(12.5 * metric.scale)
    assert _sample_value(list(engine_metrics({})), name) is None  # unknown: left out
