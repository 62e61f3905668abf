"""The rig's launch profiles as the config names them, and the one in force.

``[serving] recipe`` (a table or a path) is the profile ``default``; under ``--simulate``
with no recipe, the simulated engine is. ``[serving.profiles.NAME]`` tables are the others
(recipe keys, or ``recipe = "path"`` relative to the config file). A bad profile is a
config error naming its key, found before anything starts, whichever profile is active.

The profile in force is the configured one (``[serving] profile``) until a person
switches (``fleetctl serve NAME``); the switch is kept in ``<state-dir>/profile.json`` so
a fleetd restart keeps serving (and adopts) what the person chose. Editing ``[serving]
profile`` in the config wins over an older switch: the file remembers which configured
value the switch was made under.
"""

from __future__ import annotations

import difflib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from daemon.config import Settings
from daemon.statedir import StateDir
from hwcheck.atomic import atomic_write
from serving.engines import judge_run
from serving.profiles import DEFAULT_PROFILE, Profile, ProfileSet
from serving.recipe.lint import waivable_rule_ids
from serving.recipe.recipe import (
    Recipe,
    RecipeError,
    load_recipe,
    preset_recipe,
    recipe_from_table,
)
from serving.recipe.rulesets import ROW_CHUNK_ENV
from serving.sim.checkpoint import CheckpointKind, write_sim_checkpoint
from serving.sim.crash_depth import CARDS_FILE
from serving.sim.scenario import EngineScenario, simulated_engine_args

log = logging.getLogger("fleetd.profiles")

SIM_PRESET = "sim-engine"


@dataclass(frozen=True)
class ConfiguredRecipe:
    """One profile's recipe as configured: a table, or a path relative to the config."""

    key: str
    table: dict[str, object] | None
    path: Path | None


def configured_recipes(settings: Settings, config_dir: Path | None) -> list[ConfiguredRecipe]:
    """Every configured profile's recipe source, ``default`` first, in config order."""

    def resolve(raw: str) -> Path:
        path = Path(raw)
        return path if path.is_absolute() or config_dir is None else config_dir / path

    found: list[ConfiguredRecipe] = []
    serving = settings.serving
    if isinstance(serving.recipe, str):
        found.append(ConfiguredRecipe("serving.recipe", None, resolve(serving.recipe)))
    elif isinstance(serving.recipe, dict):
        found.append(ConfiguredRecipe("serving.recipe", serving.recipe, None))
    for name, table in serving.profiles.items():
        key = f"serving.profiles.{name}"
        raw = table.get("recipe")
        if isinstance(raw, str):
            found.append(ConfiguredRecipe(key, None, resolve(raw)))
        else:
            found.append(ConfiguredRecipe(key, table, None))
    return found


def _load(item: ConfiguredRecipe) -> Recipe:
    """The recipe, or ``RecipeError`` whose line starts with the config key."""
    try:
        if item.path is not None:
            recipe = load_recipe(item.path)
        else:
            recipe = recipe_from_table(item.table or {}, f"[{item.key}]")
    except RecipeError as exc:
        raise RecipeError(f"{item.key}: {exc}") from None
    # A waiver of an id no rule has is a typo that would silently waive nothing: refused
    # at load like any bad profile, not found later as a lint error refusing autostart.
    unknown = sorted(set(recipe.lint.waive) - waivable_rule_ids())
    if unknown:
        close = difflib.get_close_matches(unknown[0], waivable_rule_ids(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else " (fleetctl recipe lint lists them)"
        raise RecipeError(f"{item.key}: lint.waive: no lint rule has the id {unknown[0]!r}{hint}")
    return recipe


def resolve_profiles(
    settings: Settings, config_dir: Path | None, simulated: Recipe | None
) -> ProfileSet | None:
    """The configured profiles (``simulated``: the default under ``--simulate``), or None.

    Raises ``RecipeError`` (one line, starting with the config key) for a bad profile, and
    for a ``[serving] profile = "default"`` with no recipe behind it.
    """
    profiles: list[Profile] = []
    for item in configured_recipes(settings, config_dir):
        name = DEFAULT_PROFILE if item.key == "serving.recipe" else item.key.rsplit(".", 1)[1]
        source = str(item.path) if item.path is not None else f"[{item.key}]"
        profiles.append(Profile(name, _load(item), source))
    configured = settings.serving.active_default()
    if simulated is not None and DEFAULT_PROFILE not in {p.name for p in profiles}:
        # Under --simulate the simulated engine stays the default profile: a configured
        # [serving.profiles.X] is one more to serve, not a silent replacement of it (it is
        # in force only when [serving] profile names it).
        profiles.insert(0, Profile(DEFAULT_PROFILE, simulated, "the simulated engine"))
        if settings.serving.profile is None:
            configured = DEFAULT_PROFILE
    if not profiles:
        return None
    run = settings.serving.run
    if run is not None:  # refused in one line: a card or a port shared, several engines
        configured = judge_run(ProfileSet(profiles, profiles[0].name), run)
    if configured not in {p.name for p in profiles}:
        raise RecipeError(f"serving.profile: {configured!r} names no recipe")
    return ProfileSet(profiles, configured)


def simulated_recipe(
    sim_engine: EngineScenario,
    build_file: Path | None = None,
    state_dir: Path | None = None,
) -> Recipe:
    """The simulated engine with the scenario's ``[engine]`` behaviour.

    ``build_file`` is the simulated image file (``serving.sim.images``) the engine reads
    its build from; ``[engine] speculative = false`` serves it without DSpark. In
    ``state_dir`` it reads what the caps do to its speed and writes its load
    (``serving.sim.perf``), and there the scenario's ``[engine] checkpoint`` is written
    (once) for its ``model`` to name.
    """
    recipe = preset_recipe(SIM_PRESET)
    extra = (*recipe.extra_args, *simulated_engine_args(sim_engine))
    if build_file is not None:
        extra = (*extra, "--sim-build-file", str(build_file))
        # Beside it, the simulated cards' memory (``daemon.engine.sim_xids`` keeps it).
        extra = (*extra, "--sim-cards-file", str(build_file.with_name(CARDS_FILE)))
    update: dict[str, object] = {}
    if state_dir is not None:
        files = StateDir(state_dir)
        extra = (*extra, "--sim-power-file", str(files.sim_engine_power))
        extra = (*extra, "--sim-load-file", str(files.sim_engine_load))
        if sim_engine.checkpoint is not CheckpointKind.NONE:
            # The model is the scenario's checkpoint on disk: the preflight and the
            # simulated engine's loading judge its shards (``serving.sim.checkpoint``).
            update["model"] = str(write_sim_checkpoint(files.sim_checkpoint, sim_engine.checkpoint))
    update["extra_args"] = extra
    if not sim_engine.speculative:
        update["speculative"] = None
    chunk = sim_engine.logits_row_chunk
    if chunk is not None:
        env = {k: v for k, v in recipe.env.items() if k != ROW_CHUNK_ENV}
        if chunk:
            env[ROW_CHUNK_ENV] = str(chunk)
        else:
            waive = {**recipe.lint.waive, "row-chunk-unset": "the scenario's launch, on purpose"}
            update["lint"] = recipe.lint.model_copy(update={"waive": waive})
        update["env"] = env
    return recipe.model_copy(update=update)


def profiles_for(
    settings: Settings,
    config_path: Path | None,
    sim_engine: EngineScenario | None,
    build_file: Path | None = None,
    state_dir: Path | None = None,
) -> ProfileSet | None:
    """The profiles of the config at ``config_path`` (the simulated engine under ``--simulate``).

    Raises ``RecipeError`` (one line, naming the config key) for a bad profile.
    """
    simulated = None if sim_engine is None else simulated_recipe(sim_engine, build_file, state_dir)
    config_dir = config_path.parent if config_path is not None else None
    profiles = resolve_profiles(settings, config_dir, simulated)
    if profiles is None or not settings.guard.enabled:
        return profiles
    return behind_guard(profiles)


def behind_guard(profiles: ProfileSet) -> ProfileSet:
    """Every profile's engine on loopback, on a port fleetd chooses (``port = 0``).

    With ``[guard] listen`` set, agents call the guard; the engine must not be reachable
    around it (nor hold the port the guard may want), so it moves to an internal port,
    chosen once and kept in the state dir like the simulated engine's.
    """
    moved = [
        Profile(
            name,
            profiles.get(name).recipe.model_copy(update={"host": "127.0.0.1", "port": 0}),
            profiles.get(name).source,
        )
        for name in profiles.names
    ]
    return ProfileSet(moved, profiles.configured)


def recipe_for_daemon(
    settings: Settings, config_path: Path | None, sim_engine: EngineScenario | None
) -> Recipe | None:
    """The configured profile's recipe; the simulated engine under ``--simulate``; else none."""
    profiles = profiles_for(settings, config_path, sim_engine)
    return None if profiles is None else profiles.get(profiles.configured).recipe


class ActiveProfile:
    """``<state-dir>/profile.json``: the profile in force and the configured one it replaced.

    ``image``: the image reference a rollback pinned the profile in force to
    (``repo@sha256:...``; ``daemon.engine.rollback``), absent otherwise.
    """

    def __init__(self, state_dir: Path) -> None:
        self._path = StateDir(state_dir).active_profile

    def choose(self, profiles: ProfileSet) -> str:
        """The profile in force at start: a person's switch, unless the config changed since."""
        try:
            saved = json.loads(self._path.read_text())
            name, configured = str(saved["profile"]), str(saved["configured"])
        except (OSError, ValueError, KeyError, TypeError):
            return profiles.configured
        if configured != profiles.configured:
            log.info("[serving] profile changed to %s: it replaces %s", profiles.configured, name)
            return profiles.configured
        if name not in profiles:
            log.warning(
                "the profile in force (%s) is no longer configured: using %s", name, configured
            )
            return profiles.configured
        return name

    def pinned_image(self, name: str) -> str | None:
        """The image a rollback pinned profile ``name`` to (None: its recipe's own)."""
        try:
            saved = json.loads(self._path.read_text())
            image = saved.get("image") if saved.get("profile") == name else None
        except (OSError, ValueError, AttributeError):
            return None
        return image if isinstance(image, str) and image else None

    def save(self, name: str, profiles: ProfileSet, image: str | None = None) -> None:
        """Keep ``name`` in force across fleetd restarts (a failure is logged, not raised)."""
        document: dict[str, str] = {"profile": name, "configured": profiles.configured}
        if image is not None:
            document["image"] = image
        try:
            atomic_write(self._path, json.dumps(document) + "\n")
        except OSError as exc:
            log.error(
                "cannot write %s (%s): a fleetd restart goes back to %s",
                self._path,
                exc.strerror or exc,
                profiles.configured,
            )
