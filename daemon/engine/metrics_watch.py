"""The engine's own metrics against their 24 h median: an event when an alarm starts or ends.

Each poll hands the engine's newest metrics here (``serving.runtime.engine_alarms``
judges them). The window of past figures is memory (one value per scrape, 24 h), filled
from the stored engine samples at start so a fleetd restart keeps its normal. A change
of an alarm records a ``serving`` event (``details.kind = "engine_metric"``), which
alerting turns into ``engine_metric:<metric>`` (fires, then resolves).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from datetime import UTC, datetime, timedelta

from daemon.store import Store, StoreError
from hwcheck.model import EventKind, Severity
from serving.runtime.engine_alarms import ACCEPTANCE, TTFT, Alarm, judge_acceptance, judge_ttft
from serving.runtime.metrics import EngineMetrics
from serving.runtime.states import ServingChange
from serving.settings import ServingSettings

log = logging.getLogger("fleetd.engine")

BASELINE = timedelta(hours=24)
ADVICE = {
    ACCEPTANCE: (
        "the DSpark build's draft acceptance collapsed: compare builds (fleetctl builds), "
        "look for the NaN-logit guard (patch 0007) and out-of-vocab lines in fleetctl logs; "
        "restart the engine, or serve without --speculative-config until it is fixed"
    ),
    TTFT: (
        "prefill slowed down: check the power brake and clocks (fleetctl status), requests "
        "waiting and preemptions (the engine's metrics), and context lengths"
    ),
}


class EngineMetricsWatch:
    """Judges each new engine metrics sample; records alarm changes (thread-safe)."""

    def __init__(self, store: Store, settings: ServingSettings) -> None:
        self._store = store
        self._settings = settings
        self._lock = threading.Lock()
        self._acceptance: deque[tuple[datetime, float]] = deque()
        self._ttft: deque[tuple[datetime, float]] = deque()
        self._last_ts: datetime | None = None
        self._firing: dict[str, bool] = {}

    def load(self, now: datetime | None = None) -> None:
        """Fill the window from the stored samples of the last 24 h."""
        now = now or datetime.now(UTC)
        try:
            samples = self._store.list_engine_samples(now - BASELINE, now + timedelta(seconds=1))
        except StoreError as exc:
            log.warning("engine metrics baseline not read: %s", exc)
            return
        with self._lock:
            for sample in samples:
                stored = sample.figures
                if stored.spec_acceptance_ratio is not None:
                    self._acceptance.append((sample.ts, stored.spec_acceptance_ratio))
                if stored.ttft_p95_s is not None:
                    self._ttft.append((sample.ts, stored.ttft_p95_s))

    def observe(self, metrics: EngineMetrics | None) -> list[Alarm]:
        """Judge a sample not seen before; the alarms that changed (each recorded)."""
        if metrics is None:
            return []
        with self._lock:
            if metrics.ts == self._last_ts:
                return []
            self._last_ts = metrics.ts
            for window in (self._acceptance, self._ttft):
                while window and metrics.ts - window[0][0] > BASELINE:
                    window.popleft()
            settings = self._settings
            figures = metrics.figures
            alarms = [
                judge_acceptance(
                    figures.spec_acceptance_ratio,
                    [v for _, v in self._acceptance],
                    settings.acceptance_alert_share,
                    settings.metrics_baseline_min_samples,
                ),
                judge_ttft(
                    figures.ttft_p95_s,
                    [v for _, v in self._ttft],
                    settings.ttft_alert_factor,
                    settings.metrics_baseline_min_samples,
                ),
            ]
            if figures.spec_acceptance_ratio is not None:
                self._acceptance.append((metrics.ts, figures.spec_acceptance_ratio))
            if figures.ttft_p95_s is not None:
                self._ttft.append((metrics.ts, figures.ttft_p95_s))
            changed = [
                alarm
                for alarm in alarms
                if alarm is not None and self._firing.get(alarm.metric, False) != alarm.firing
            ]
            for alarm in changed:
                self._firing[alarm.metric] = alarm.firing
        for alarm in changed:
            self._record(alarm)
        return changed

    def _record(self, alarm: Alarm) -> None:
        severity = Severity.WARNING if alarm.firing else Severity.INFO
        words = "engine metric alarm" if alarm.firing else "engine metric back to normal"
        log.log(logging.WARNING if alarm.firing else logging.INFO, "%s: %s", words, alarm.message)
        try:
            self._store.record_event(
                EventKind.SERVING,
                severity,
                f"{words}: {alarm.message}",
                details={
                    "kind": ServingChange.ENGINE_METRIC.value,
                    "metric": alarm.metric,
                    "firing": alarm.firing,
                    "value": alarm.value,
                    "median": alarm.median,
                    "advice": ADVICE[alarm.metric],
                },
            )
        except StoreError as exc:
            log.error("engine metric event not stored: %s", exc)
