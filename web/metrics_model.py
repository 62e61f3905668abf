"""What ``/metrics`` is built from: a typed copy of the daemon's in-memory picture.

``web`` declares what it needs (``MetricsSource`` answering ``RigMetrics``) and the daemon
implements it from its monitor, engine status and follower health, never from NVML or
the database: a Prometheus scrape every few seconds must not queue behind a slow GPU or
a locked SQLite file. ``DurationHistogram`` is the poll timer the daemon feeds; it keeps
Prometheus' cumulative buckets so the exposition is a plain copy.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from hwcheck.hostfacts.model import DeviceAer
from hwcheck.model import Severity
from serving.runtime.states import ServingState

# Poll durations: a healthy NVML poll of 4-8 cards takes tens of milliseconds; a sick card
# can block NVML for seconds (the call timeout bounds it), so the buckets span both.
POLL_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True)
class HistogramSnapshot:
    """Cumulative bucket counts (``+Inf`` last), their sum and count, at one instant."""

    upper_bounds_s: tuple[float, ...]
    cumulative_counts: tuple[int, ...]  # one per bound, then the +Inf bucket (= count)
    sum_s: float
    count: int


class DurationHistogram:
    """A thread-safe histogram of durations in seconds (the poll job observes, scrapes read)."""

    def __init__(self, upper_bounds_s: Sequence[float] = POLL_BUCKETS_S) -> None:
        self._bounds = tuple(sorted(upper_bounds_s))
        self._lock = threading.Lock()
        self._counts = [0] * (len(self._bounds) + 1)  # per bucket, not cumulative
        self._sum_s = 0.0

    def observe(self, seconds: float) -> None:
        """Count one duration."""
        slot = bisect.bisect_left(self._bounds, seconds)
        with self._lock:
            self._counts[slot] += 1
            self._sum_s += seconds

    def snapshot(self) -> HistogramSnapshot:
        """A consistent copy with cumulative counts, as Prometheus exposes them."""
        with self._lock:
            counts = list(self._counts)
            sum_s = self._sum_s
        cumulative: list[int] = []
        running = 0
        for count in counts:
            running += count
            cumulative.append(running)
        return HistogramSnapshot(self._bounds, tuple(cumulative), sum_s, running)


@dataclass(frozen=True)
class CardMetrics:
    """One card's latest readings; ``None`` is "not known" and is left out of the exposition."""

    index: int
    uuid: str
    pci_bus_id: str
    lost: bool
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    energy_total_mj: int | None = None  # NVML's counter since the driver loaded
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    vram_unlocked: bool | None = None  # the vram_unlocked check's verdict for this card
    power_brake_active: bool | None = None
    temperature_c: float | None = None
    memory_temperature_c: float | None = None  # HBM
    sm_clock_mhz: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    xid_counts: Mapping[int, int] = field(default_factory=dict)  # Xid number -> since boot
    clock_event_reasons: tuple[str, ...] | None = None  # active ones by name; None: unknown
    name: str = ""
    serial: str | None = None
    vbios_version: str | None = None
    driver_version: str | None = None
    # Host truth: the BAR1 aperture, the VBIOS's top clocks, PCIe replays since boot.
    bar1_total_mib: int | None = None
    sm_clock_max_mhz: int | None = None
    memory_clock_max_mhz: int | None = None
    pcie_replay_count: int | None = None
    # What nvitop shows: busy shares (%), PCIe traffic (KiB/s), how many compute processes.
    utilization_gpu_pct: int | None = None
    utilization_memory_pct: int | None = None
    pcie_tx_kib_s: int | None = None
    pcie_rx_kib_s: int | None = None
    processes: int | None = None
    in_profile: bool | None = None  # the profile in force uses it (None: no engine)


@dataclass(frozen=True)
class CanaryMetrics:
    """One engine canary's last judged result (``result``: pass, warn, fail or stale)."""

    name: str
    result: str
    figure: float | None


@dataclass(frozen=True)
class GuardMetrics:
    """The traffic guard as ``/metrics`` shows it (totals since fleetd started)."""

    up: bool
    restarts: int
    counters: Mapping[str, float]  # requests, pinned, cap_refused, engine_unavailable, ...
    signs: Mapping[str, float]  # replies showing each sign (serving.detectors.Sign)
    tokens: Mapping[tuple[str, str], float]  # (key name, prompt|completion) -> tokens
    sessions: int  # sessions seen in the last hour
    deepest_session_tokens: int | None


@dataclass(frozen=True)
class RigMetrics:
    """The rig as ``/metrics`` shows it."""

    cards: tuple[CardMetrics, ...]
    check_severities: Mapping[str, Severity]  # worst severity per check id
    reboot_required: bool
    serving_state: ServingState
    serving_restarts: int
    generation_tokens_per_s: float | None
    kernel_log_follower_up: bool
    poll_durations: HistogramSnapshot
    polls: int
    last_poll_age_s: float | None
    canaries: tuple[CanaryMetrics, ...] = ()
    log_signature_totals: Mapping[str, int] = field(default_factory=dict)  # since fleetd start
    pcie_aer: tuple[DeviceAer, ...] = ()  # AER counters of the cards and the ports above them
    rig_status: int | None = None  # the rig's verdict: 0 ok, 1 warning, 2 critical, 3 unknown
    guard: GuardMetrics | None = None  # the traffic guard, when configured
    # The engine's own figures (``EngineMetrics.as_dict()``: ttft_p95_s, ...); None unknown.
    engine_figures: Mapping[str, float | None] = field(default_factory=dict)


class MetricsSource(Protocol):
    """The daemon side of ``/metrics``: answers from memory only."""

    def metrics_state(self) -> RigMetrics:
        """The current picture (no NVML call, no database query)."""
        ...
