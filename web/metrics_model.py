"""What ``/metrics`` is built from: typed copies of the daemon's in-memory picture.

Each wing's collector (``web.metrics_cards``, ``web.metrics_rig``, ``web.metrics_engine``,
...) reads its part of the picture through a callable the daemon hands it when it
composes the registry, never NVML or the database: a Prometheus scrape every few
seconds must not queue behind a slow GPU or a locked SQLite file. These are the typed
parts that are not already a model of a lower layer (``GpuSnapshot``, ``ServingStatus``,
``DeviceAer``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hwcheck.model import GpuSnapshot, Severity
from serving.runtime.states import ServingState


@dataclass(frozen=True)
class CardMetrics:
    """One card's latest snapshot, with the verdicts about it that ``/metrics`` shows.

    The readings themselves are the snapshot's, exported as ``hwcheck.readings`` declares
    them: no second list of card fields here to keep in step with ``GpuSnapshot``.
    """

    card: GpuSnapshot
    xid_counts: Mapping[int, int] = field(default_factory=dict)  # Xid number -> since boot
    vram_unlocked: bool | None = None  # the vram_unlocked check's verdict for this card
    in_profile: bool | None = None  # the profile in force uses it (None: no engine)

    @property
    def labels(self) -> list[str]:
        """``gpu``, ``uuid``, ``pci_bus_id``: every per-card series carries them."""
        return [str(self.card.index), self.card.uuid, self.card.pci_bus_id]


@dataclass(frozen=True)
class CanaryMetrics:
    """One engine canary's last judged result (``result``: pass, warn, fail or stale)."""

    name: str
    result: str
    figure: float | None


@dataclass(frozen=True)
class EngineCanaries:
    """A side engine's canaries (``[serving] run``): their series carry ``engine="NAME"``."""

    engine: str  # its profile
    canaries: tuple[CanaryMetrics, ...]


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
    repairs: Mapping[tuple[str, str], float] = field(default_factory=dict)  # (key, repair)
    queue: Mapping[str, float] = field(default_factory=dict)  # the fair queue's figures


@dataclass(frozen=True)
class EngineSeries:
    """One engine of several (``[serving] run``): its series carry ``engine="NAME"``."""

    name: str  # its profile
    state: ServingState
    restarts: int
    figures: Mapping[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class RigState:
    """The rig's own series: check verdicts, the rig's verdict, the poll loop, the follower."""

    check_severities: Mapping[str, Severity]  # worst severity per check id
    kernel_log_follower_up: bool
    polls: int
    last_poll_age_s: float | None
    rig_status: int | None = None  # the rig's verdict: 0 ok, 1 warning, 2 critical, 3 unknown
