"""What watches the engine's output and health beside its supervisor, built in one place.

The canaries (short and deep rounds), the build each engine run is (``daemon.engine.
builds``), and the engine's own metrics against their 24 h median (``daemon.engine.
metrics_watch``). ``EngineWatch.poll`` is the poll job's engine step: store the newest
metrics, judge them, notice a new build.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from daemon.canaries.builds_view import BuildsApi
from daemon.canaries.service import CanaryService, build_canaries
from daemon.config import Settings
from daemon.engine.builds import BuildProbe, BuildTracker
from daemon.engine.metrics_watch import EngineMetricsWatch
from daemon.engine.service import EngineService
from daemon.rig.monitor import RigMonitor
from daemon.store import Store
from hwcheck.threads import CrashReport
from serving.sim.images import ImageStore


@dataclass(frozen=True)
class EngineWatch:
    """The engine's watchers (one per fleetd with an engine)."""

    engine: EngineService
    canaries: CanaryService
    builds: BuildTracker
    builds_api: BuildsApi
    metrics: EngineMetricsWatch

    def load(self) -> None:
        """At start: the engine metrics' 24 h baseline from the store."""
        self.metrics.load()

    def poll(self) -> None:
        """Each poll: store the engine's metrics, judge them, notice the build serving."""
        self.engine.record_metrics()
        self.metrics.observe(self.engine.supervisor.status().metrics)
        self.builds.poll()


def watch_engine(
    settings: Settings,
    store: Store,
    engine: EngineService,
    monitor: RigMonitor,
    probe: BuildProbe,
    images: ImageStore | None,
    ask_recovery: Callable[[str, str], str],
    on_crash: CrashReport | None = None,
) -> EngineWatch:
    """The watchers of ``engine``; ``probe`` is the container runtime (the simulated one)."""
    builds = BuildTracker(store, engine, probe, settings.serving)
    return EngineWatch(
        engine=engine,
        canaries=build_canaries(
            settings,
            store,
            engine,
            monitor,
            on_crash,
            builds=builds,
            ask_recovery=ask_recovery,
        ),
        builds=builds,
        builds_api=BuildsApi(store, builds, images, engine),
        metrics=EngineMetricsWatch(store, settings.serving),
    )
