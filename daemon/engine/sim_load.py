"""What the engine does to the simulated cards: fleetd tells the simulated rig.

Under ``--simulate`` the cards are a scenario, but the engine is a real child process: its
state (loading or serving), its pid, its load (requests running) and the cards its
profile uses are fleetd's to know. ``SimulatedRig.attach_engine`` reads them here at each
poll, so ``status``, ``top`` and the dashboard show the engine's memory, utilisation,
PCIe traffic and process on its cards as they would on a real rig
(``hwcheck.sim.workload``).
"""

from __future__ import annotations

from collections.abc import Callable

from daemon.engine.service import EngineService
from hwcheck.sim.workload import EngineLoad, EnginePhase
from serving.runtime.states import ServingState

_LOADING = frozenset({ServingState.STARTING})
_SERVING = frozenset({ServingState.READY, ServingState.UNHEALTHY, ServingState.STOPPING})
DEFAULT_MEMORY_FRACTION = 0.9  # vLLM's own default gpu_memory_utilization


def engine_load(engine: EngineService) -> Callable[[], EngineLoad | None]:
    """A reader of what ``engine`` does to its cards now (None while it does not run)."""

    def load() -> EngineLoad | None:
        status = engine.supervisor.status()
        if status.pid is None or status.state not in _LOADING | _SERVING:
            return None
        recipe = engine.recipe
        running = None if status.metrics is None else status.metrics.requests_running
        container = None if recipe.mode == "process" else recipe.container_name
        return EngineLoad(
            pid=status.pid,
            phase=EnginePhase.LOADING if status.state in _LOADING else EnginePhase.SERVING,
            cards=engine.recipe_cards(),
            busy=bool(running),
            memory_fraction=recipe.gpu_memory_utilization or DEFAULT_MEMORY_FRACTION,
            container=container,
        )

    return load
