"""The bench wing built from fleetd's parts (never the daemon itself)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from daemon.bench.api import BenchApi
from daemon.bench.service import BenchService, CurrentBuild, build_document
from daemon.engine.service import EngineService
from daemon.rig.caps import CapKeeper
from daemon.rig.monitor import RigMonitor
from daemon.store import Latch, Store
from hwcheck.backend import GpuBackend
from web.models import StatusDocument


def build_bench(
    store: Store,
    engine: EngineService | None,
    builds: CurrentBuild | None,
    caps: CapKeeper,
    gpu: GpuBackend,
    monitor: RigMonitor,
    latch_in_force: Callable[[], Latch | None],
    marker_path: Path,
    status: Callable[[], StatusDocument],
) -> BenchApi:
    """The bench service and its API face."""
    service = BenchService(store, engine, builds, caps, gpu, monitor, latch_in_force, marker_path)

    def status_dict() -> dict[str, Any]:
        document: dict[str, Any] = status().model_dump(mode="json")
        return document

    def recipe() -> dict[str, Any] | None:
        if engine is None:
            return None
        document: dict[str, Any] = engine.recipe_document().model_dump(mode="json")
        return {"profile": engine.profile, **document}

    def build() -> dict[str, Any] | None:
        return None if builds is None else build_document(builds.current())

    return BenchApi(
        service,
        store,
        status_dict,
        recipe,
        build,
        lambda: None if engine is None else engine.supervisor.log_capture.secrets,
        lambda: getattr(monitor.view().latest, "driver_version", None),
    )
