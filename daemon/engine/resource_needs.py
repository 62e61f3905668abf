"""What the profile in force needs of the host: the filesystems to watch and the RAM.

The ``host_resources`` check (``hwcheck.checks.host_resources``) judges the room fleetd
reads at each poll; this says where to look and how much RAM to expect: the state dir's
filesystem (the history, the engine log) and the model's (its host path: a container's
model path mapped back through its mounts), and RAM for the engine's host processes (the
API server and one worker per pipeline rank, each holding a few GiB while the weights
stream through) plus a container's shared memory (``shm_size``).
"""

from __future__ import annotations

from pathlib import Path

from daemon.engine.service import EngineService
from hwcheck.host import HostSources
from hwcheck.resources import HostResources
from serving.recipe.model_dir import host_model_path
from serving.recipe.recipe import Recipe, shm_size_bytes

MIB = 1024 * 1024
HOST_PROCESS_MIB = 4 * 1024  # the API server, and each pipeline rank's worker
BASE_RAM_MIB = 8 * 1024  # the OS, fleetd, page cache the weights stream through


def resource_paths(state_dir: Path, recipe: Recipe | None) -> list[tuple[str, Path]]:
    """``(label, path)`` of each filesystem to watch: the state dir's, then the model's."""
    paths = [("state dir", state_dir)]
    if recipe is not None:
        model = host_model_path(recipe.model, recipe.mounts, recipe.mode != "process")
        if model is not None:
            paths.append(("model", model))
    return paths


def ram_needed_mib(recipe: Recipe | None) -> int | None:
    """About how much RAM the recipe's engine needs on the host (None: no engine)."""
    if recipe is None:
        return None
    ranks = max(1, recipe.pipeline_parallel_size or 1)
    shm_mib = 0 if recipe.shm_size is None else shm_size_bytes(recipe.shm_size) // MIB
    return BASE_RAM_MIB + HOST_PROCESS_MIB * (ranks + 1) + shm_mib


def read_host_resources(
    host: HostSources, state_dir: Path, engine: EngineService | None
) -> HostResources:
    """The state dir's and the model's filesystems and the RAM, for ``host_resources``.

    The profile in force is read at each call: ``fleetctl serve`` changes it.
    """
    recipe = None if engine is None else engine.recipe
    return host.resources(resource_paths(state_dir, recipe), ram_needed_mib(recipe))
