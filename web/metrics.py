"""The rig in Prometheus' text format, from the daemon's memory (``GET /metrics``).

Names follow Prometheus' conventions (``cmpfleet_`` prefix, base units: watts, bytes,
hertz, seconds; counters end in ``_total``). Per-card series carry ``gpu`` (the NVML
index), ``uuid`` and ``pci_bus_id``. A reading that is not known (a lost card's power,
an engine that reports no throughput yet) is left out rather than exported as 0, so a
graph shows a gap instead of a false value.

The route is ``web.routes.metrics``. Each app gets its own ``CollectorRegistry`` holding
one collector that reads ``MetricsSource.metrics_state()`` at scrape time: nothing is
registered globally (two apps in one test process never share series) and nothing goes
stale between scrapes.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from serving.runtime.states import ServingState
from web.metrics_engine import engine_metrics
from web.metrics_guard import guard_metrics
from web.metrics_host import host_metrics
from web.metrics_model import CardMetrics, MetricsSource, RigMetrics
from web.version import build_info

CARD_LABELS = ("gpu", "uuid", "pci_bus_id")
# The classic text format every Prometheus 2.x reads (our names need none of 1.0.0's escaping).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MIB_BYTES = 1024 * 1024
MHZ_HERTZ = 1_000_000


def _card_labels(card: CardMetrics) -> list[str]:
    return [str(card.index), card.uuid, card.pci_bus_id]


def _flag(value: bool) -> float:
    return 1.0 if value else 0.0


def _card_gauges(cards: tuple[CardMetrics, ...]) -> Iterator[Metric]:
    """The per-card gauges; each reading scaled to its base unit, unknowns left out."""
    specs: list[tuple[str, str, float, str]] = [
        ("power_watts", "Power draw.", 1.0, "power_draw_w"),
        ("power_limit_watts", "Power limit in force.", 1.0, "power_limit_w"),
        ("memory_total_bytes", "Memory the card reports.", MIB_BYTES, "memory_total_mib"),
        ("memory_used_bytes", "Memory in use on the card.", MIB_BYTES, "memory_used_mib"),
        ("temperature_celsius", "GPU core temperature.", 1.0, "temperature_c"),
        ("memory_temperature_celsius", "HBM temperature.", 1.0, "memory_temperature_c"),
        ("sm_clock_hertz", "SM clock.", MHZ_HERTZ, "sm_clock_mhz"),
        ("pcie_link_gen", "Current PCIe link generation.", 1.0, "pcie_gen"),
        ("pcie_link_width", "Current PCIe link width (lanes).", 1.0, "pcie_width"),
        ("utilization_ratio", "Share of the last sample period the SMs were busy (0-1).",
         0.01, "utilization_gpu_pct"),
        ("memory_utilization_ratio",
         "Share of the last sample period the memory controller was busy (0-1).",
         0.01, "utilization_memory_pct"),
        ("pcie_tx_bytes_per_second", "PCIe traffic sent by the card.", 1024.0, "pcie_tx_kib_s"),
        ("pcie_rx_bytes_per_second", "PCIe traffic received by the card.", 1024.0,
         "pcie_rx_kib_s"),
        ("processes", "Compute processes on the card (nvidia-smi's process list).", 1.0,
         "processes"),
    ]  # fmt: skip
    for suffix, help_text, scale, attribute in specs:
        family = GaugeMetricFamily(f"cmpfleet_gpu_{suffix}", help_text, labels=CARD_LABELS)
        for card in cards:
            value = getattr(card, attribute)
            if value is not None:
                family.add_metric(_card_labels(card), float(value) * scale)
        yield family
    flags: list[tuple[str, str, str]] = [
        ("vram_unlocked", "1 when the card shows its unlocked memory (vram_unlocked check).",
         "vram_unlocked"),
        ("power_brake_active", "1 while the hardware power brake (PWRBRK#) slows the card.",
         "power_brake_active"),
        ("in_profile", "1 when the launch profile in force uses the card.", "in_profile"),
    ]  # fmt: skip
    for suffix, help_text, attribute in flags:
        family = GaugeMetricFamily(f"cmpfleet_gpu_{suffix}", help_text, labels=CARD_LABELS)
        for card in cards:
            value = getattr(card, attribute)
            if value is not None:
                family.add_metric(_card_labels(card), _flag(value))
        yield family
    lost = GaugeMetricFamily(
        "cmpfleet_gpu_lost", "1 when the card stopped answering (GPU lost).", labels=CARD_LABELS
    )
    xids = CounterMetricFamily(
        "cmpfleet_gpu_xid_errors",
        "Xid errors the kernel logged for the card since boot, by Xid number.",
        labels=[*CARD_LABELS, "xid"],
    )
    for card in cards:
        lost.add_metric(_card_labels(card), _flag(card.lost))
        for xid, count in sorted(card.xid_counts.items()):
            xids.add_metric([*_card_labels(card), str(xid)], float(count))
    yield lost
    yield xids
    yield from _card_facts(cards)


INFO_LABELS = (*CARD_LABELS, "name", "serial", "vbios", "driver")


def _card_facts(cards: tuple[CardMetrics, ...]) -> Iterator[Metric]:
    """Energy counter, active clock event reasons and the card's identity (info, value 1)."""
    energy = CounterMetricFamily(
        "cmpfleet_gpu_energy_joules",
        "Energy the card used since the driver loaded (NVML total energy; 0 at a reboot).",
        labels=CARD_LABELS,
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
        labels = _card_labels(card)
        if card.energy_total_mj is not None:
            energy.add_metric(labels, card.energy_total_mj / 1000.0)
        for reason in card.clock_event_reasons or ():
            reasons.add_metric([*labels, reason], 1.0)
        identity = (card.name, card.serial, card.vbios_version, card.driver_version)
        info.add_metric([*labels, *(value or "" for value in identity)], 1.0)
    yield from (energy, reasons, info)


def _build_info() -> Metric:
    """``cmpfleet_build_info{version, python, python_implementation} 1``."""
    facts = build_info()
    family = GaugeMetricFamily(
        "cmpfleet_build_info", "The cmpfleet version serving, always 1.", labels=list(facts)
    )
    family.add_metric(list(facts.values()), 1.0)
    return family


def _rig_metrics(state: RigMetrics) -> Iterator[Metric]:
    """Checks, latch, engine, follower and the poll timer."""
    checks = GaugeMetricFamily(
        "cmpfleet_check_status",
        "Worst result of each check: 0 ok, 1 warning, 2 critical.",
        labels=["check"],
    )
    for check_id, severity in sorted(state.check_severities.items()):
        checks.add_metric([check_id], float(severity.rank))
    yield checks
    overall = GaugeMetricFamily(
        "cmpfleet_rig_status",
        "The rig's verdict (as fleetctl status): 0 ok, 1 warning, 2 critical, 3 unknown.",
    )
    if state.rig_status is not None:
        overall.add_metric([], float(state.rig_status))
    yield overall
    yield GaugeMetricFamily(
        "cmpfleet_reboot_required",
        "1 while the reboot-required latch is set.",
        value=_flag(state.reboot_required),
    )
    serving = GaugeMetricFamily(
        "cmpfleet_serving_state", "1 for the engine's current state.", labels=["state"]
    )
    for serving_state in ServingState:
        serving.add_metric([serving_state.value], _flag(serving_state is state.serving_state))
    yield serving
    yield CounterMetricFamily(
        "cmpfleet_serving_restarts",
        "Engine restarts (a running total that backoff resets never zero).",
        value=float(state.serving_restarts),
    )
    tokens = GaugeMetricFamily(
        "cmpfleet_serving_generation_tokens_per_second",
        "Generation throughput the engine reports.",
    )
    if state.generation_tokens_per_s is not None:
        tokens.add_metric([], state.generation_tokens_per_s)
    yield tokens
    yield GaugeMetricFamily(
        "cmpfleet_kernel_log_follower_up",
        "1 while the kernel-log follower reads (Xids are seen).",
        value=_flag(state.kernel_log_follower_up),
    )
    durations = state.poll_durations
    buckets = [
        (repr(float(bound)), float(count))
        for bound, count in zip(durations.upper_bounds_s, durations.cumulative_counts, strict=False)
    ]
    buckets.append(("+Inf", float(durations.count)))
    yield HistogramMetricFamily(
        "cmpfleet_poll_duration_seconds",
        "Time one poll of the cards and their checks took.",
        buckets=buckets,
        sum_value=durations.sum_s,
    )
    yield CounterMetricFamily(
        "cmpfleet_polls", "Polls completed since fleetd started.", value=float(state.polls)
    )
    age = GaugeMetricFamily(
        "cmpfleet_last_poll_age_seconds", "Seconds since the last complete poll."
    )
    if state.last_poll_age_s is not None:
        age.add_metric([], state.last_poll_age_s)
    yield age


# A stale verdict (from before the engine's current run, or the engine not ready) gets
# its own value: it must never read as the pass it once was.
CANARY_RESULT_VALUE = {"pass": 0.0, "warn": 1.0, "fail": 2.0, "stale": 3.0}


def _canary_metrics(state: RigMetrics) -> Iterator[Metric]:
    """Engine canaries' last verdicts and figures, and the log-signature counters."""
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
    for canary in state.canaries:
        if canary.result in CANARY_RESULT_VALUE:
            results.add_metric([canary.name], CANARY_RESULT_VALUE[canary.result])
        if canary.result == "stale":
            continue  # its figure judged an engine run that no longer serves
        if canary.figure is not None and canary.name == "copy_fidelity":
            accuracy.add_metric([], canary.figure)
        if canary.figure is not None and canary.name == "throughput":
            decode.add_metric([], canary.figure)
    signatures = CounterMetricFamily(
        "cmpfleet_engine_log_signature",
        "Non-fatal engine log signatures seen since fleetd started.",
        labels=["signature"],
    )
    for name, count in sorted(state.log_signature_totals.items()):
        signatures.add_metric([name], float(count))
    yield from (results, accuracy, decode, signatures)


class RigCollector(Collector):
    """Reads the daemon's picture at each scrape and turns it into metric families."""

    def __init__(self, source: MetricsSource) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        """Every ``cmpfleet_`` family, from one consistent ``metrics_state()``."""
        state = self._source.metrics_state()
        yield from _card_gauges(state.cards)
        yield from _rig_metrics(state)
        yield from _canary_metrics(state)
        yield _build_info()
        yield from host_metrics(state)
        yield from guard_metrics(state.guard)
        yield from engine_metrics(state)
