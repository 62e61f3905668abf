"""Each card reading declared in ``hwcheck.readings`` reaches the store, the API and /metrics.

Every reading gets a distinct value on one card; the test follows that card through the
store's write path (the ``samples`` row read back with plain SQL), the status document
and its API model, and the ``/metrics`` exposition. A new row in ``READINGS`` is checked
here with no test to add.
"""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry
from sqlalchemy import create_engine, text

from daemon.store import Store
from daemon.store.models import Sample
from daemon.store.samples import SAMPLE_COLUMNS
from hwcheck.model import GpuProcess, GpuSnapshot
from hwcheck.readings import READINGS, Reading
from hwcheck.report import card_document
from tests.support.cards import make_card, make_rig
from web.metrics_cards import CardsCollector
from web.metrics_model import CardMetrics
from web.models import CardDocument

SNAPSHOT_FIELDS = {field.name for field in fields(GpuSnapshot)}
FLAGS = {field.name for field in fields(GpuSnapshot) if str(field.type).startswith("bool")}


def _distinct_card() -> GpuSnapshot:
    """A card whose every numeric reading is a different number (so no mix-up passes)."""
    values: dict[str, Any] = {}
    for number, reading in enumerate(READINGS, start=3):
        if reading.name not in SNAPSHOT_FIELDS or reading.name == "lost":
            continue  # a property (power_brake_active), or the flag a live card has False
        if reading.name == "processes":
            values["processes"] = (GpuProcess(pid=4242, used_memory_mib=100),) * 2
        elif reading.name in FLAGS:
            values[reading.name] = True  # a flag's only distinct value from a card's default
        else:
            values[reading.name] = number * 7
    return make_card(0, **values)


CARD = _distinct_card()


def test_every_reading_is_a_snapshot_attribute_with_one_row() -> None:
    names = [reading.name for reading in READINGS]
    assert len(names) == len(set(names)), "a reading declared twice"
    for reading in READINGS:
        assert hasattr(CARD, reading.name), reading.name
        assert reading.metric is not None or reading.store_column or reading.api_field, (
            f"{reading.name} is declared but goes nowhere"
        )


def test_every_samples_column_is_a_declared_reading() -> None:
    stored = {r.store_column for r in READINGS if r.store_column is not None}
    columns = {column.name for column in Sample.__table__.columns} - {"card_id", "ts"}
    assert stored == columns
    assert set(SAMPLE_COLUMNS) == columns | {"card_id", "ts"}


@pytest.mark.parametrize("reading", [r for r in READINGS if r.store_column], ids=lambda r: r.name)
def test_a_stored_reading_lands_in_its_column(reading: Reading, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    store = Store.open(url)
    try:
        store.record_samples(make_rig([CARD]))
    finally:
        store.close()
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            (stored,) = connection.execute(
                text(f"SELECT {reading.store_column} FROM samples")  # noqa: S608 - our column
            ).one()
    finally:
        engine.dispose()
    assert stored == getattr(CARD, reading.name)


@pytest.mark.parametrize("reading", [r for r in READINGS if r.api_field], ids=lambda r: r.name)
def test_an_api_reading_is_in_the_document_and_its_model(reading: Reading) -> None:
    assert reading.api_field is not None
    document = card_document(CARD, 0, "ok")
    assert reading.api_field in CardDocument.model_fields, reading.api_field
    assert reading.api_field in document
    shown = document[reading.api_field]
    expected = getattr(CARD, reading.name)
    if isinstance(expected, tuple):
        assert len(shown) == len(expected)
    else:
        assert shown == expected
    CardDocument.model_validate(document)


def _exposition(card: GpuSnapshot) -> dict[tuple[str, str], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CardsCollector(lambda: (CardMetrics(card),)))
    text_out = generate_latest(registry).decode()
    return {
        (sample.name, sample.labels.get("gpu", "")): sample.value
        for family in text_string_to_metric_families(text_out)
        for sample in family.samples
    }


@pytest.mark.parametrize("reading", [r for r in READINGS if r.metric], ids=lambda r: r.name)
def test_a_metric_reading_is_exported_in_its_base_unit(reading: Reading) -> None:
    metric = reading.metric
    assert metric is not None
    name = f"{metric.name}_total" if metric.kind == "counter" else metric.name
    value = reading.value(CARD)
    assert value is not None
    assert _exposition(CARD)[(name, "0")] == pytest.approx(value * metric.scale / metric.divisor)
    unknown = replace(CARD, **{reading.name: None}) if reading.name in SNAPSHOT_FIELDS else None
    if unknown is not None and reading.name != "lost":
        assert (name, "0") not in _exposition(unknown), "an unknown reading must be left out"
