"""What ``fleetctl check`` judges the host against.

The config's ``[host]`` pins, fleetd's recorded baseline when this user can read it, and
the configured profile's tensor-parallel size.

A simulated check never reads the real state dir (nothing of the real host leaks in):
the simulated rig brings its own baseline.
"""

from __future__ import annotations

import os
from pathlib import Path

from daemon.config import DEFAULT_STATE_DIR, Settings
from daemon.engine.profiles import recipe_for_daemon
from hwcheck.hostfacts.baseline import (
    BASELINE_FILE,
    BaselineFileError,
    HostBaseline,
    load_baseline_file,
)
from hwcheck.hostfacts.judging import HostJudging
from serving.recipe.parallel import tensor_parallel_size
from serving.recipe.recipe import Recipe, RecipeError


def configured_recipe(settings: Settings, config: Path | None) -> Recipe | None:
    """The configured profile's recipe, or None (none, or one ``recipe lint`` would refuse)."""
    try:
        return recipe_for_daemon(settings, config, None)
    except RecipeError:
        return None


def recorded_baseline(state_dir: Path) -> HostBaseline | None:
    """fleetd's recorded baseline, when this user can read it (the state dir is root's)."""
    try:
        return load_baseline_file(state_dir / BASELINE_FILE)
    except BaselineFileError:
        return None


def local_state_dir() -> Path:
    """This machine's fleetd state dir (``$CMPFLEET_STATE_DIR``, else the default)."""
    return Path(os.environ.get("CMPFLEET_STATE_DIR", DEFAULT_STATE_DIR))


def host_judging(settings: Settings, config: Path | None, *, simulated: bool) -> HostJudging:
    """The pins, the recorded baseline (real rigs only) and the TP size for one check."""
    recorded = None if simulated else recorded_baseline(local_state_dir())
    return HostJudging(
        pins=settings.host,
        recorded=recorded,
        tensor_parallel_size=tensor_parallel_size(configured_recipe(settings, config)),
    )
