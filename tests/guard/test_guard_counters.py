"""The guard's counters: one row per member, and ``/metrics`` iterates the rows.

A new ``GuardCounter`` without its row fails here; ``cap_estimated`` (a prompt the cap
judged by estimate) reaches ``/metrics`` and the reference like every other counter.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from serving.guard.counters import GUARD_COUNTERS, GuardCounter
from web.metrics_guard import guard_metrics
from web.metrics_model import GuardMetrics

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference.md"


def test_every_counter_has_its_row() -> None:
    assert set(GUARD_COUNTERS) == set(GuardCounter)
    assert all(row.help.strip() for row in GUARD_COUNTERS.values())


class _Guard(Collector):
    def __init__(self, counters: dict[str, float]) -> None:
        self.counters = counters

    def collect(self):  # type: ignore[no-untyped-def]
        guard = GuardMetrics(
            up=True,
            restarts=0,
            counters=self.counters,
            signs={},
            tokens={},
            sessions=0,
            deepest_session_tokens=None,
        )
        yield from guard_metrics(guard)


def test_each_exported_counter_is_on_metrics_with_its_count() -> None:
    counts = {member.value: float(n) for n, member in enumerate(GuardCounter, start=1)}
    registry = CollectorRegistry()
    registry.register(_Guard(counts))
    text = generate_latest(registry).decode()
    for member, row in GUARD_COUNTERS.items():
        if row.metric is not None:
            assert f"{row.metric}_total {counts[member]}" in text, member
    assert "cmpfleet_guard_context_estimated_total" in text


def test_each_exported_counter_is_in_the_reference() -> None:
    reference = REFERENCE.read_text()
    for row in GUARD_COUNTERS.values():
        if row.metric is not None:
            assert f"`{row.metric}_total`" in reference, row.metric
