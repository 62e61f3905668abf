"""Probing one engine on a cadence: readiness while starting, liveness and metrics once ready.

``HealthWatch`` keeps when the next probe and the next metrics scrape are due, counts
failed health probes in a row, and turns a probe into a typed verdict for the supervisor:
ready, still starting, healthy, or unhealthy with the reason. Metrics are scraped every
``metrics_interval_s`` while the engine is healthy; a failed scrape is logged and the
last metrics are kept.

A starting engine is asked every ``READINESS_PROBE_S`` (or every ``probe_interval_s`` when
that is shorter): until vLLM's API server listens the probe is a refused connection, then a
503, both free; asked only every ``probe_interval_s`` (5 s), "engine ready", the canaries'
first round and a waiting ``fleetctl start`` lagged the engine by up to five seconds at
every start and restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from serving.runtime.launchers import EngineHandle
from serving.runtime.metrics import EngineMetrics, MetricsError, MetricsScraper
from serving.runtime.probes import EngineProber, ProbeTarget
from serving.settings import ServingSettings, SupervisorTuning

_LOG = logging.getLogger(__name__)

READINESS_PROBE_S = 1.0  # a starting engine's readiness probe, at most this far apart


@dataclass(frozen=True)
class BecameReady:
    """The readiness probe passed."""


@dataclass(frozen=True)
class StillStarting:
    """Not ready yet, within the startup timeout."""


@dataclass(frozen=True)
class Healthy:
    """Ready and answering (or not yet failed often enough to count)."""


@dataclass(frozen=True)
class Unhealthy:
    """Not ready in time, or too many health probes failed in a row."""

    reason: str


Verdict = BecameReady | StillStarting | Healthy | Unhealthy


class HealthWatch:
    """Probe cadence and health bookkeeping of the engine the supervisor watches."""

    def __init__(
        self,
        client: httpx.Client,
        serving: ServingSettings,
        tuning: SupervisorTuning,
        clock: Callable[[], float],
    ) -> None:
        self._serving = serving
        self._prober = EngineProber(client, tuning.probe_timeout_s)
        self._scraper = MetricsScraper(
            client,
            clock=clock,
            timeout_s=tuning.probe_timeout_s,
            window_s=serving.metrics_window_s,
        )
        self.target: ProbeTarget | None = None
        self.next_probe = 0.0
        self._next_metrics = 0.0
        self._failures = 0
        self._starting_since = 0.0
        self.ready_since: float | None = None
        self.metrics: EngineMetrics | None = None

    def attach(self, handle: EngineHandle, now: float) -> None:
        """Watch a newly launched or adopted engine (starting)."""
        self.target = ProbeTarget(handle.record.base_url, handle.record.served_model_name)
        self._starting_since = now
        self.ready_since = None
        self._failures = 0
        self.metrics = None
        self._scraper.reset()

    def detach(self) -> None:
        """The engine ended: nothing to probe."""
        self.target = None
        self.metrics = None

    def schedule_next(self, now: float, starting: bool) -> None:
        """The next probe is one interval from ``now`` (readiness's, while ``starting``)."""
        self.next_probe = now + self.interval_s(starting)

    def interval_s(self, starting: bool) -> float:
        """Seconds between probes: ``probe_interval_s`` (at most ``READINESS_PROBE_S`` starting)."""
        interval_s = self._serving.probe_interval_s
        return min(interval_s, READINESS_PROBE_S) if starting else interval_s

    def probe(self, now: float, starting: bool) -> Verdict | None:
        """One probe (readiness while ``starting``, else liveness); None with no target."""
        target = self.target
        if target is None:
            return None
        if starting:
            result = self._prober.ready(target)
            if result.ok:
                return BecameReady()
            timeout_s = self._serving.startup_timeout_s
            if now - self._starting_since >= timeout_s:
                return Unhealthy(f"not ready after {timeout_s:g} s ({result.detail})")
            return StillStarting()
        result = self._prober.health(target)
        if result.ok:
            self._failures = 0
            return Healthy()
        self._failures += 1
        if self._failures >= self._serving.probe_failures:
            return Unhealthy(f"{self._failures} health probes failed in a row ({result.detail})")
        return Healthy()

    def became_ready(self, now: float) -> None:
        """Start the liveness and metrics cadence."""
        self.ready_since = now
        self._next_metrics = now
        self._failures = 0

    def scrape_if_due(self, now: float) -> None:
        """Scrape the engine's metrics when they are due."""
        if self.target is None or now < self._next_metrics:
            return
        self._next_metrics = now + self._serving.metrics_interval_s
        try:
            self.metrics = self._scraper.scrape(self.target.metrics_url)
        except MetricsError as exc:
            _LOG.warning("engine metrics: %s", exc)
