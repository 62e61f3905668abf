"""What the traffic guard is told each tick about the engine it fronts.

The guard (``serving.guard``) steers requests by the engine's URL and state, the profile
in force, the build it runs (its recipe hash) and its slots (``max_num_seqs``), and stops
taking new sessions while the rig drains (``daemon.engine.drain``).
"""

from __future__ import annotations

from daemon.engine.drain import DrainKeeper
from daemon.engine.fleet import SideEngines, guard_routes
from daemon.engine.service import EngineService
from serving.guard.repair.queue import max_num_seqs_of
from serving.guard.supervisor import EngineView


def guard_engine_view(
    engine: EngineService | None, drain: DrainKeeper, sides: SideEngines | None = None
) -> EngineView:
    """What the guard is told each tick: the engine's URL, state, profile, build, slots.

    With ``[serving] run``'s other engines, every engine's route too (the guard routes by
    the request's ``model``).
    """
    draining = drain.guard_words()
    if engine is None:
        return EngineView(None, None, None, draining=draining)
    status = engine.supervisor.status()
    latest = engine.latest_launch
    launch = latest[1] if latest is not None else None
    return EngineView(
        status.url,
        status.state.value,
        engine.profile,
        launch.recipe_hash if launch is not None else None,
        max_num_seqs_of(launch.argv) if launch is not None else None,
        draining,
        () if sides is None else guard_routes(engine, sides),
    )
