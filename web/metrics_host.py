"""The host-truth part of ``/metrics``: BAR1, max clocks, PCIe replays and AER counters.

Per card (labels ``gpu``, ``uuid``, ``pci_bus_id``): ``cmpfleet_gpu_bar1_total_bytes``,
``cmpfleet_gpu_sm_clock_max_hertz``, ``cmpfleet_gpu_memory_clock_max_hertz`` and the
counter ``cmpfleet_gpu_pcie_replay_errors_total``; per device (cards and the switch or
root ports above them, label ``pci_bus_id``): ``cmpfleet_pcie_aer_errors_total`` by
``severity`` (``correctable``, ``nonfatal``, ``fatal``). Counters count since boot, so
``rate()`` over them is the climb ``pcie_errors`` judges. Unknown readings are left out.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from web.metrics_model import CardMetrics, RigMetrics

CARD_LABELS = ("gpu", "uuid", "pci_bus_id")
MIB_BYTES = 1024 * 1024
MHZ_HERTZ = 1_000_000


def _labels(card: CardMetrics) -> list[str]:
    return [str(card.index), card.uuid, card.pci_bus_id]


def host_metrics(state: RigMetrics) -> Iterator[Metric]:
    """The host-truth families, from one consistent ``metrics_state()``."""
    gauges: list[tuple[str, str, float, str]] = [
        ("bar1_total_bytes", "BAR1 aperture (64 GiB patched, 256 MiB stock).", MIB_BYTES,
         "bar1_total_mib"),
        ("sm_clock_max_hertz", "Maximum SM clock (from the VBIOS).", MHZ_HERTZ, "sm_clock_max_mhz"),
        ("memory_clock_max_hertz", "Maximum memory clock (1,728 MHz; 1,458 on an old VBIOS).",
         MHZ_HERTZ, "memory_clock_max_mhz"),
    ]  # fmt: skip
    for suffix, help_text, scale, attribute in gauges:
        family = GaugeMetricFamily(f"cmpfleet_gpu_{suffix}", help_text, labels=CARD_LABELS)
        for card in state.cards:
            value = getattr(card, attribute)
            if value is not None:
                family.add_metric(_labels(card), float(value) * scale)
        yield family
    replays = CounterMetricFamily(
        "cmpfleet_gpu_pcie_replay_errors",
        "PCIe replays NVML counted on the card since boot (a climbing count: the riser).",
        labels=CARD_LABELS,
    )
    for card in state.cards:
        if card.pcie_replay_count is not None:
            replays.add_metric(_labels(card), float(card.pcie_replay_count))
    yield replays
    aer = CounterMetricFamily(
        "cmpfleet_pcie_aer_errors",
        "PCIe AER errors since boot of a card or a port above it, by severity.",
        labels=["pci_bus_id", "severity"],
    )
    for device in state.pcie_aer:
        counts = device.counts
        for severity, value in (
            ("correctable", counts.correctable),
            ("nonfatal", counts.nonfatal),
            ("fatal", counts.fatal),
        ):
            if value is not None:
                aer.add_metric([device.pci_bus_id, severity], float(value))
    yield aer
