"""Every ``/metrics`` collector of the wings, fed with a quiet rig, for tests of the exposition.

What the daemon registers (``daemon.runtime.Daemon._metrics_collectors``), each reading a
fixed picture instead of a wing: no cards, no checks, a stopped engine, no canary
verdicts, a guard that counted nothing. A test swaps one piece (``engine_status``) to
look at one family.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from serving.runtime.states import ServingStatus
from web.metrics_canaries import CanariesCollector
from web.metrics_cards import CardsCollector
from web.metrics_crashes import CrashesCollector
from web.metrics_engine import EngineCollector
from web.metrics_guard import GuardCollector
from web.metrics_host import HostCollector
from web.metrics_model import CardMetrics, GuardMetrics, RigState
from web.metrics_recovery import RecoveryCollector
from web.metrics_rig import (
    BuildInfoCollector,
    PollDurationCollector,
    RigCollector,
    poll_duration_histogram,
)

QUIET_RIG = RigState(
    check_severities={}, kernel_log_follower_up=True, polls=0, last_poll_age_s=None
)
QUIET_GUARD = GuardMetrics(
    up=True,
    restarts=0,
    counters={},
    signs={},
    tokens={},
    sessions=0,
    deepest_session_tokens=None,
)


def every_collector(
    engine_status: ServingStatus | None = None,
    cards: Sequence[CardMetrics] = (),
    *,
    guard: bool = True,
) -> tuple[Collector, ...]:
    """One collector per wing, as fleetd registers them (``guard``: with ``[guard]``)."""
    guarded = (GuardCollector(lambda: QUIET_GUARD),) if guard else ()
    return (
        CardsCollector(lambda: cards),
        RigCollector(lambda: QUIET_RIG),
        PollDurationCollector(poll_duration_histogram()),
        HostCollector(lambda: ()),
        EngineCollector(lambda: engine_status),
        CanariesCollector(None),
        RecoveryCollector(lambda: False, lambda: False),
        CrashesCollector(dict),
        *guarded,
        BuildInfoCollector(),
    )


def exposition(*collectors: Collector) -> str:
    """The text format of a registry holding ``collectors``."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    return generate_latest(registry).decode()
