"""What the engine does to the simulated cards: fleetd tells the simulated rig.

Under ``--simulate`` the cards are a scenario, but the engine is a real child process: its
state (loading or serving), its pid, its load (requests running) and the cards its
profile uses are fleetd's to know. ``SimulatedRig.attach_engine`` reads them here at each
poll, so ``status``, ``top`` and the dashboard show the engine's memory, utilisation,
PCIe traffic and process on its cards as they would on a real rig
(``hwcheck.sim.workload``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from daemon.engine.service import EngineService
from hwcheck.sim.workload import EngineLoad, EnginePhase
from serving.runtime.states import ServingState

_LOADING = frozenset({ServingState.STARTING})
_SERVING = frozenset({ServingState.READY, ServingState.UNHEALTHY, ServingState.STOPPING})
DEFAULT_MEMORY_FRACTION = 0.9  # vLLM's own default gpu_memory_utilization


def load_fraction(load_file: Path | None) -> float:
    """The share of the simulated engine's slots running requests (its own file; 0: none)."""
    if load_file is None:
        return 0.0
    try:
        data = json.loads(load_file.read_text())
        return min(max(float(data["running"]) / max(float(data["max_num_seqs"]), 1.0), 0.0), 1.0)
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def engine_load(
    engine: EngineService, load_file: Path | None = None
) -> Callable[[], EngineLoad | None]:
    """A reader of what ``engine`` does to its cards now (None while it does not run).

    ``load_file``: where the simulated engine says how many requests it runs
    (``serving.sim.perf``), read at each snapshot so the cards' draw follows the load.
    """

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
            load_fraction=load_fraction(load_file),
        )

    return load
