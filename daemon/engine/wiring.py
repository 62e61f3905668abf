"""The engine as fleetd runs it: the engine service, its reports to recovery, recovery's hold.

One place joins the two directions: the supervisor reports each run's end to recovery
(``ReportsToRecovery``), and recovery drives the engine through ``SupervisedEngine``; the
supervisor checks recovery's token before every move asked of it (``recovery.moves``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from daemon.config import Settings
from daemon.engine.recovery_port import ReportsToRecovery, SupervisedEngine
from daemon.engine.service import EngineService
from daemon.rig.monitor import RigMonitor
from daemon.store import Store
from hwcheck.host import HostSources
from hwcheck.model import GpuSnapshot
from hwcheck.threads import CrashReport
from recovery.controller import RecoveryController
from serving.profiles import ProfileSet
from serving.recipe.masking import KnownSecrets
from serving.runtime.foreign import ContainerProbe


def wire_engine(
    profiles: ProfileSet,
    settings: Settings,
    state_dir: Path,
    store: Store,
    monitor: RigMonitor,
    host: HostSources,
    recovery: RecoveryController,
    *,
    rig_cards: Callable[[], tuple[GpuSnapshot, ...]],
    containers: ContainerProbe | None,
    known_secrets: KnownSecrets,
    defer: Callable[[Callable[[], None]], None],
    on_crash: CrashReport | None = None,
    sim_engine_args: Sequence[str] | None = None,
    primary: bool = True,
    sim_images: Path | None = None,
) -> EngineService:
    """The engine service for ``profiles``, reporting to ``recovery`` and driven by it.

    ``sim_engine_args`` (under ``--simulate``): container launches run the simulated engine
    with these flags instead (``daemon.engine.sim_containers``). ``primary``: the rig's
    first engine, whose state the store keeps (a side engine's is its own: ``fleet``).
    ``sim_images``: the simulated container runtime's image file (the rig's, every engine's).
    """
    reports = ReportsToRecovery()
    engine = EngineService(
        profiles,
        settings,
        state_dir,
        store,
        monitor,
        host,
        reports=reports,
        starts=recovery,
        containers=containers,
        known_secrets=known_secrets,
        defer=defer,
        on_crash=on_crash,
        move_guard=recovery.engine_moves.check,
        sim_engine_args=sim_engine_args,
        primary=primary,
        sim_images=sim_images,
    )
    reports.attach(recovery)
    recovery.attach_engine(SupervisedEngine.for_service(engine, rig_cards))
    return engine
