"""Every card reading, declared once: its name, unit, help, store column, API field, metric.

A reading is a field of ``hwcheck.model.GpuSnapshot`` (or one of its properties) that
NVML reads once per poll. Where it goes from there is said here and nowhere else:

- ``store_column``: the ``samples`` column that keeps it (``daemon.store.samples`` builds
  its rows from this table; the ORM column itself is ``daemon.store.models.Sample``'s,
  written by a migration, because the schema is frozen DDL);
- ``api_field``: the key of the card in the status document (``hwcheck.report``) and in
  ``web.models.CardDocument``;
- ``charted``: rolled up per minute (``daemon.store.rollups``) and served to the
  dashboard's charts (``daemon.rig.history``);
- ``metric``: its ``cmpfleet_gpu_*`` family on ``/metrics`` (``web.metrics_cards`` iterates
  this table), scaled to Prometheus' base unit.

So a new reading is its field on ``GpuSnapshot``, its row here, its NVML read
(``hwcheck/nvml/cards.py``) and its simulation (``hwcheck/sim/``); the dashboard only if
it draws it. ``tests/hwcheck/test_readings.py`` checks that each row reaches all three.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hwcheck.model import GpuSnapshot

MIB_BYTES = 1024 * 1024
MHZ_HERTZ = 1_000_000
KIB_BYTES = 1024


class MetricKind(enum.StrEnum):
    """Prometheus' type of a reading's family: a value now, or a count that only climbs."""

    GAUGE = "gauge"
    COUNTER = "counter"


@dataclass(frozen=True, slots=True)
class CardMetric:
    """How a reading shows on ``/metrics``: ``cmpfleet_gpu_<suffix>`` per card.

    The exported value is ``reading * scale / divisor`` (its base unit: bytes, hertz,
    joules, a 0-1 ratio); a reading that is not known is left out, never exported as 0.
    """

    suffix: str
    help: str
    scale: float = 1.0
    divisor: float = 1.0
    kind: MetricKind = MetricKind.GAUGE

    @property
    def name(self) -> str:
        """The family's name (a counter's samples add ``_total``)."""
        return f"cmpfleet_gpu_{self.suffix}"


@dataclass(frozen=True, slots=True)
class Reading:
    """One card reading and every place it is kept or shown (``None``: not there)."""

    name: str  # the GpuSnapshot attribute
    unit: str  # what a person reads beside the number ("" for a count or a flag)
    help: str
    store_column: str | None = None
    api_field: str | None = None
    metric: CardMetric | None = None
    # Kept as 1-minute min/avg/max (``Rollup1m``'s columns) and drawn on the charts
    # (``daemon.rig.history``); only a stored reading can be.
    charted: bool = False

    def value(self, card: GpuSnapshot) -> float | None:
        """The reading of ``card`` as a number (a flag 0/1, a listing its length), or ``None``."""
        raw = getattr(card, self.name)
        if raw is None:
            return None
        if isinstance(raw, tuple):
            return float(len(raw))
        return float(raw)

    def metric_value(self, card: GpuSnapshot) -> float | None:
        """The value ``/metrics`` exports for ``card`` (base unit), ``None`` to leave out."""
        value = self.value(card)
        if value is None or self.metric is None:
            return None
        return value * self.metric.scale / self.metric.divisor


def _gauge(suffix: str, help_text: str, scale: float = 1.0) -> CardMetric:
    return CardMetric(suffix, help_text, scale)


READINGS: tuple[Reading, ...] = (
    Reading("power_draw_w", "W", "power draw", "power_draw_w", "power_draw_w",
            _gauge("power_watts", "Power draw."), charted=True),
    Reading("power_limit_w", "W", "power limit in force", "power_limit_w", "power_limit_w",
            _gauge("power_limit_watts", "Power limit in force.")),
    Reading("energy_total_mj", "mJ", "energy used since the driver loaded (0 at each boot)",
            metric=CardMetric(
                "energy_joules",
                "Energy the card used since the driver loaded (NVML total energy; 0 at a reboot).",
                divisor=1000.0, kind=MetricKind.COUNTER)),
    Reading("memory_total_mib", "MiB", "memory the card reports", None, "memory_total_mib",
            _gauge("memory_total_bytes", "Memory the card reports.", MIB_BYTES)),
    Reading("memory_used_mib", "MiB", "memory in use", "memory_used_mib", "memory_used_mib",
            _gauge("memory_used_bytes", "Memory in use on the card.", MIB_BYTES), charted=True),
    Reading("temperature_c", "°C", "GPU core temperature", "temperature_c", "temperature_c",
            _gauge("temperature_celsius", "GPU core temperature."), charted=True),
    Reading("memory_temperature_c", "°C", "HBM temperature", "memory_temperature_c",
            "memory_temperature_c", _gauge("memory_temperature_celsius", "HBM temperature.")),
    Reading("sm_clock_mhz", "MHz", "SM clock", "sm_clock_mhz", "sm_clock_mhz",
            _gauge("sm_clock_hertz", "SM clock.", MHZ_HERTZ), charted=True),
    # The mask is stored; the document and /metrics show its bits by name (decoded there).
    Reading("clock_event_reasons", "", "clock event (throttle) reason bits",
            "clock_event_reasons"),
    Reading("power_brake_active", "", "the hardware power brake (PWRBRK#) is set", None,
            "power_brake_active",
            _gauge("power_brake_active",
                   "1 while the hardware power brake (PWRBRK#) slows the card.")),
    Reading("pcie_gen_current", "", "current PCIe link generation", "pcie_gen", "pcie_gen",
            _gauge("pcie_link_gen", "Current PCIe link generation.")),
    Reading("pcie_width_current", "lanes", "current PCIe link width", "pcie_width",
            "pcie_width", _gauge("pcie_link_width", "Current PCIe link width (lanes).")),
    Reading("lost", "", "the card stopped answering", "lost", None,
            _gauge("lost", "1 when the card stopped answering (GPU lost).")),
    # Host truth (issue 18): the BAR1 aperture, the VBIOS's top clocks, PCIe replays.
    Reading("bar1_total_mib", "MiB", "BAR1 aperture", None, "bar1_total_mib",
            _gauge("bar1_total_bytes", "BAR1 aperture (64 GiB patched, 256 MiB stock).",
                   MIB_BYTES)),
    Reading("sm_clock_max_mhz", "MHz", "maximum SM clock", None, "sm_clock_max_mhz",
            _gauge("sm_clock_max_hertz", "Maximum SM clock (from the VBIOS).", MHZ_HERTZ)),
    Reading("memory_clock_max_mhz", "MHz", "maximum memory clock", None,
            "memory_clock_max_mhz",
            _gauge("memory_clock_max_hertz",
                   "Maximum memory clock (1,728 MHz; 1,458 on an old VBIOS).", MHZ_HERTZ)),
    Reading("pcie_replay_count", "", "PCIe replays since boot", None, "pcie_replay_count",
            CardMetric("pcie_replay_errors",
                       "PCIe replays NVML counted on the card since boot (a climbing count: "
                       "the riser).", kind=MetricKind.COUNTER)),
    # What nvitop shows: busy shares over the driver's sample period, PCIe traffic.
    Reading("utilization_gpu_pct", "%", "SMs busy, % of the last sample", "utilization_gpu_pct",
            "utilization_gpu_pct",
            _gauge("utilization_ratio",
                   "Share of the last sample period the SMs were busy (0-1).", 0.01),
            charted=True),
    Reading("utilization_memory_pct", "%", "memory controller busy, %", None,
            "utilization_memory_pct",
            _gauge("memory_utilization_ratio",
                   "Share of the last sample period the memory controller was busy (0-1).",
                   0.01)),
    Reading("pcie_tx_kib_s", "KiB/s", "PCIe sent, KiB/s", None, "pcie_tx_kib_s",
            _gauge("pcie_tx_bytes_per_second", "PCIe traffic sent by the card.", KIB_BYTES)),
    Reading("pcie_rx_kib_s", "KiB/s", "PCIe received, KiB/s", None, "pcie_rx_kib_s",
            _gauge("pcie_rx_bytes_per_second", "PCIe traffic received by the card.",
                   KIB_BYTES)),
    # Row remapping (DCGM's CORRECTABLE/UNCORRECTABLE_REMAPPED_ROWS, ROW_REMAP_PENDING and
    # ROW_REMAP_FAILURE); left out where the card does not report it.
    Reading("remapped_rows_correctable", "", "rows remapped after correctable errors", None,
            "remapped_rows_correctable",
            _gauge("remapped_rows_correctable",
                   "HBM rows remapped after correctable errors (kept on the card).")),
    Reading("remapped_rows_uncorrectable", "", "rows remapped after uncorrectable errors",
            None, "remapped_rows_uncorrectable",
            _gauge("remapped_rows_uncorrectable",
                   "HBM rows remapped after uncorrectable errors (kept on the card).")),
    Reading("row_remap_pending", "", "a row remap waits for the next reset", None,
            "row_remap_pending",
            _gauge("row_remap_pending", "1 while a row remap waits for the next GPU reset.")),
    Reading("row_remap_failed", "", "a row remap failed (no spare row left)", None,
            "row_remap_failed",
            _gauge("row_remap_failed",
                   "1 when a row remap failed: no spare row left (NVIDIA's RMA case).")),
    # The listing is the document's; /metrics counts it.
    Reading("processes", "", "its compute processes (null: the driver does not list them)",
            None, "processes",
            _gauge("processes", "Compute processes on the card (nvidia-smi's process list).")),
)  # fmt: skip


def stored_readings() -> dict[str, Reading]:
    """``samples`` column -> the reading it keeps."""
    return {r.store_column: r for r in READINGS if r.store_column is not None}


def charted_columns() -> tuple[str, ...]:
    """The ``samples`` columns rolled up per minute and charted, in declaration order."""
    return tuple(r.store_column for r in READINGS if r.charted and r.store_column is not None)
