"""The cards' part of ``/metrics``: each declared reading, the Xids, the clock events, identity.

Every ``cmpfleet_gpu_*`` reading family is one row of ``hwcheck.readings.READINGS``
(name, HELP, unit scale, gauge or counter): a new reading reaches ``/metrics`` by being
declared there. The rest are the cards' verdicts and facts that are not readings: the
vram_unlocked verdict, the profile's cards, Xid counts, active clock event reasons by
name and the identity (``cmpfleet_gpu_info``). Per-card series carry ``gpu`` (the NVML
index), ``uuid`` and ``pci_bus_id``; a reading that is not known is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hwcheck.readings import READINGS, MetricKind
from web.metrics_model import CardMetrics

CARD_LABELS = ("gpu", "uuid", "pci_bus_id")
INFO_LABELS = (*CARD_LABELS, "name", "serial", "vbios", "driver")

# The cards' verdicts (not readings): (suffix, help, CardMetrics attribute), 1/0 when known.
VERDICTS: tuple[tuple[str, str, str], ...] = (
    ("vram_unlocked", "1 when the card shows its unlocked memory (vram_unlocked check).",
     "vram_unlocked"),
    ("in_profile", "1 when the launch profile in force uses the card.", "in_profile"),
)  # fmt: skip


def reading_families(cards: Sequence[CardMetrics]) -> Iterator[Metric]:
    """One family per declared reading with a metric (each present, empty when unknown)."""
    for reading in READINGS:
        metric = reading.metric
        if metric is None:
            continue
        family: GaugeMetricFamily | CounterMetricFamily
        if metric.kind is MetricKind.COUNTER:
            family = CounterMetricFamily(metric.name, metric.help, labels=CARD_LABELS)
        else:
            family = GaugeMetricFamily(metric.name, metric.help, labels=CARD_LABELS)
        for card in cards:
            value = reading.metric_value(card.card)
            if value is not None:
                family.add_metric(card.labels, value)
        yield family


def card_families(cards: Sequence[CardMetrics]) -> Iterator[Metric]:
    """Every ``cmpfleet_gpu_*`` family of ``cards``."""
    yield from reading_families(cards)
    for suffix, help_text, attribute in VERDICTS:
        family = GaugeMetricFamily(f"cmpfleet_gpu_{suffix}", help_text, labels=CARD_LABELS)
        for card in cards:
            value = getattr(card, attribute)
            if value is not None:
                family.add_metric(card.labels, 1.0 if value else 0.0)
        yield family
    xids = CounterMetricFamily(
        "cmpfleet_gpu_xid_errors",
        "Xid errors the kernel logged for the card since boot, by Xid number.",
        labels=[*CARD_LABELS, "xid"],
    )
    reasons = GaugeMetricFamily(
        "cmpfleet_gpu_clock_event_reason",
        "1 for each clock event (throttle) reason active now, e.g. hw_power_brake_slowdown.",
        labels=[*CARD_LABELS, "reason"],
    )
    info = GaugeMetricFamily(
        "cmpfleet_gpu_info", "The card's identity, always 1 (join on gpu).", labels=INFO_LABELS
    )
    for card in cards:
        labels, snapshot = card.labels, card.card
        for xid, count in sorted(card.xid_counts.items()):
            xids.add_metric([*labels, str(xid)], float(count))
        for reason in snapshot.clock_event_names:
            reasons.add_metric([*labels, reason], 1.0)
        identity = (snapshot.name, snapshot.serial, snapshot.vbios_version, snapshot.driver_version)
        info.add_metric([*labels, *(value or "" for value in identity)], 1.0)
    yield from (xids, reasons, info)


class CardsCollector(Collector):
    """The cards' families at each scrape, from the rig wing's latest picture (memory only)."""

    def __init__(self, cards: Callable[[], Sequence[CardMetrics]]) -> None:
        self._cards = cards

    def collect(self) -> Iterator[Metric]:
        """Every ``cmpfleet_gpu_*`` family, from one consistent list of cards."""
        yield from card_families(self._cards())
