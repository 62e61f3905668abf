"""Turn a recipe into the exact argv and environment of a launch (``LaunchSpec``).

Process mode runs ``command + [model] + flags`` with the recipe's environment added to
the daemon's. Container modes run ``docker|podman run -d --name NAME ...`` detached, with
no ``--rm``: the supervisor follows ``logs -f`` and reads the exit code with ``inspect``
after the engine stops, and the launcher removes an old container of the same name before
it starts a new one. The recipe hash rides along as a container label so a restarted
daemon can tell whether the engine it adopts still matches the recipe.

Typed flags are placed among ``extra_args`` in the seeds' reference order, so a preset
prints exactly the reference launch; flags this module does not know keep their place.
When ``extra_args`` repeats a typed flag (the linter calls that an error), the typed one
comes later and wins, so the spec's port and served name stay true.
"""

from __future__ import annotations

import difflib
import hashlib
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from serving.recipe.flags import FlagGroup, split_flags
from serving.recipe.recipe import PYTHON_PLACEHOLDER, Recipe, RecipeError
from serving.recipe.spec import LaunchMode, LaunchSpec

RECIPE_HASH_LABEL = "cmpfleet.recipe-hash"
# Servers that take the model as a flag, not vLLM's positional: llama.cpp's ``llama-server``
# reads ``-m MODEL`` and would refuse (or ignore) a bare path.
MODEL_FLAGS = {"llama-server": "-m"}
CONTAINER_PYTHON = "python3"

# The seeds' reference launch order; typed flags slot in before the first extra flag
# that comes later in this list.
FLAG_ORDER: tuple[str, ...] = (
    "--pipeline-parallel-size",
    "--kv-cache-dtype",
    "--block-size",
    "--max-num-batched-tokens",
    "--gpu-memory-utilization",
    "--max-model-len",
    "--max-num-seqs",
    "--trust-remote-code",
    "--no-enable-flashinfer-autotune",
    "--tokenizer-mode",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "--reasoning-parser",
    "--served-model-name",
    "--speculative-config",
    "--host",
    "--port",
)
_RANK = {flag: rank for rank, flag in enumerate(FLAG_ORDER)}
_ALIASES = {"-pp": "--pipeline-parallel-size"}

# Options of ``run`` this module emits with a separate value (for display grouping).
_RUNTIME_VALUE_OPTIONS = frozenset({"--name", "--label", "--gpus", "--device", "-p", "-e", "-v"})


def recipe_hash(recipe: Recipe) -> str:
    """sha256 of the recipe's canonical JSON: equal recipes, equal hashes, on any host."""
    return hashlib.sha256(recipe.canonical_json().encode("utf-8")).hexdigest()


def _group(flag: str, *values: str) -> FlagGroup:
    return FlagGroup(flag, values, (flag, *values))


def typed_flags(recipe: Recipe, *, listen_host: str | None, listen_port: int) -> list[FlagGroup]:
    """The flags that come from typed recipe keys, in reference order."""
    groups: list[FlagGroup] = []
    if recipe.pipeline_parallel_size is not None:
        groups.append(_group("--pipeline-parallel-size", str(recipe.pipeline_parallel_size)))
    if recipe.kv_cache_dtype is not None:
        groups.append(_group("--kv-cache-dtype", recipe.kv_cache_dtype))
    if recipe.gpu_memory_utilization is not None:
        groups.append(_group("--gpu-memory-utilization", repr(recipe.gpu_memory_utilization)))
    if recipe.max_model_len is not None:
        groups.append(_group("--max-model-len", str(recipe.max_model_len)))
    if recipe.served_model_name is not None:
        groups.append(_group("--served-model-name", recipe.served_model_name))
    if recipe.speculation is not None:
        groups.append(_group("--speculative-config", recipe.speculation.config_json()))
    if listen_host is not None:
        groups.append(_group("--host", listen_host))
    groups.append(_group("--port", str(listen_port)))
    return sorted(groups, key=lambda group: _RANK[group.name])


def engine_flags(recipe: Recipe, *, listen_host: str | None, listen_port: int) -> list[FlagGroup]:
    """Typed flags merged into ``extra_args``; extra flags keep their given order.

    A typed flag that ``extra_args`` repeats goes last, so it is the one argparse keeps.
    """
    extra = split_flags(recipe.extra_args)
    repeated = {_ALIASES.get(group.name, group.name) for group in extra}
    typed = typed_flags(recipe, listen_host=listen_host, listen_port=listen_port)
    pending = [group for group in typed if group.name not in repeated]
    merged: list[FlagGroup] = []
    for group in extra:
        rank = _RANK.get(group.name)
        if rank is not None:
            while pending and _RANK[pending[0].name] < rank:
                merged.append(pending.pop(0))
        merged.append(group)
    merged.extend(pending)
    merged.extend(group for group in typed if group.name in repeated)
    return merged


def model_tokens(recipe: Recipe) -> list[str]:
    """How the command takes the model: vLLM's positional, ``-m MODEL`` for llama-server."""
    program = recipe.command[0].rsplit("/", 1)[-1] if recipe.command else ""
    flag = MODEL_FLAGS.get(program)
    return [recipe.model] if flag is None else [flag, recipe.model]


def engine_argv(
    recipe: Recipe, *, python: str, listen_host: str | None, listen_port: int
) -> list[str]:
    """``command + [model] + flags`` with ``{python}`` replaced by ``python``."""
    command = [token.replace(PYTHON_PLACEHOLDER, python) for token in recipe.command]
    flags = engine_flags(recipe, listen_host=listen_host, listen_port=listen_port)
    tokens = (token for group in flags for token in group.tokens)
    return [*command, *model_tokens(recipe), *tokens]


def _gpu_options(mode: str, gpus: str) -> list[str]:
    """Docker's ``--gpus`` or podman's CDI ``--device nvidia.com/gpu=...``."""
    if mode == "docker":
        # docker parses --gpus as CSV, so a device list must be quoted inside the value.
        return ["--gpus", "all" if gpus == "all" else f'"device={gpus}"']
    return [option for card in gpus.split(",") for option in ("--device", f"nvidia.com/gpu={card}")]


def _publish(host: str, port: int, container_port: int) -> str:
    address = f"[{host}]" if ":" in host else host
    return f"{address}:{port}:{container_port}"


def container_argv(
    recipe: Recipe, *, port: int, digest: str, image: str | None = None
) -> list[str]:
    """``docker|podman run -d --name ... IMAGE vllm serve MODEL ...``.

    ``{python}`` in ``command`` becomes the image's ``python3``: the daemon's interpreter
    path means nothing inside the container. ``image`` replaces the recipe's (a rollback
    pins the tag to an earlier build's digest).
    """
    if recipe.image is None:
        raise RecipeError(f"recipe: mode '{recipe.mode}' needs an image")
    argv = [recipe.mode, "run", "-d", "--name", recipe.container_name]
    argv += ["--label", f"{RECIPE_HASH_LABEL}={digest}"]
    argv += _gpu_options(recipe.mode, recipe.gpus)
    if recipe.shm_size is not None:
        argv.append(f"--shm-size={recipe.shm_size}")
    if recipe.ipc_host:
        argv.append("--ipc=host")
    argv += ["-p", _publish(recipe.host, port, recipe.container_port)]
    for name, value in sorted(recipe.effective_env().items()):
        argv += ["-e", f"{name}={value}"]
    for mount in recipe.mounts:
        argv += ["-v", mount]
    argv.append(image or recipe.image)
    argv += engine_argv(
        recipe, python=CONTAINER_PYTHON, listen_host=None, listen_port=recipe.container_port
    )
    return argv


def build_launch(
    recipe: Recipe,
    *,
    python: str = sys.executable,
    port: int | None = None,
    image: str | None = None,
) -> LaunchSpec:
    """The exact launch for ``recipe``.

    ``python`` replaces ``{python}`` in a process-mode ``command``; ``port`` overrides the
    recipe's port; pass a concrete one (``ports.free_port()``) when
    the recipe says ``port = 0``, which is otherwise kept as is (fine for display only).
    ``env`` holds the recipe's variables in every mode (container modes also pass them
    with ``-e`` inside ``argv``). ``image`` (container modes): run this image reference
    instead of the recipe's, a rollback's ``repo@sha256:...``; the recipe hash stays the
    recipe's (the recipe is the same; the build's digest says which image ran).
    """
    chosen_port = recipe.port if port is None else port
    if not 0 <= chosen_port <= 65535:
        raise RecipeError(f"recipe: port {chosen_port} is not a TCP port")
    digest = recipe_hash(recipe)
    if recipe.is_container:
        argv = container_argv(recipe, port=chosen_port, digest=digest, image=image)
        container_name: str | None = recipe.container_name
        labels = {RECIPE_HASH_LABEL: digest}
    else:
        argv = engine_argv(recipe, python=python, listen_host=recipe.host, listen_port=chosen_port)
        container_name = None
        labels = {}
    return LaunchSpec(
        mode=LaunchMode(recipe.mode),
        argv=tuple(argv),
        env=recipe.effective_env(),
        host=recipe.host,
        port=chosen_port,
        served_model_name=recipe.engine_name,
        container_name=container_name,
        recipe_hash=digest,
        labels=labels,
        preset_overrides=recipe.preset_overrides,
        waivers=dict(recipe.lint.waive),
    )


def _split_head(tokens: Sequence[str]) -> list[list[str]]:
    """Command and model on one line, then one line per flag."""
    head_length = next(
        (index for index, token in enumerate(tokens) if token.startswith("--")), len(tokens)
    )
    lines = [list(tokens[:head_length])] if head_length else []
    lines += [list(group.tokens) for group in split_flags(tokens[head_length:])]
    return lines


def argv_lines(spec: LaunchSpec) -> list[list[str]]:
    """``spec.argv`` grouped for reading: one option or flag with its value per line."""
    argv = list(spec.argv)
    if spec.mode is LaunchMode.PROCESS:
        return _split_head(argv)
    lines = [argv[:2]]
    index = 2
    while index < len(argv) and argv[index].startswith("-"):
        takes_value = argv[index] in _RUNTIME_VALUE_OPTIONS
        lines.append(argv[index : index + (2 if takes_value else 1)])
        index += 2 if takes_value else 1
    if index < len(argv):
        lines.append([argv[index]])
        lines += _split_head(argv[index + 1 :])
    return lines


def spec_to_dict(spec: LaunchSpec) -> dict[str, Any]:
    """The JSON form of ``fleetctl recipe show --json``."""
    return {
        "mode": str(spec.mode),
        "argv": list(spec.argv),
        "env": dict(sorted(spec.env.items())),
        "host": spec.host,
        "port": spec.port,
        "url": spec.base_url,
        "health_url": spec.health_url,
        "models_url": spec.models_url,
        "served_model_name": spec.served_model_name,
        "container_name": spec.container_name,
        "recipe_hash": spec.recipe_hash,
        "labels": dict(spec.labels),
        "preset_overrides": [override.to_dict() for override in spec.preset_overrides],
        **({"profile": spec.profile} if spec.profile is not None else {}),
        **({"lint_waived": dict(sorted(spec.waivers.items()))} if spec.waivers else {}),
    }


def show_text(spec: LaunchSpec) -> str:
    """``fleetctl recipe show``: the argv, shell-quoted and ready to paste, and the env."""
    rows = [f"profile:      {spec.profile}"] if spec.profile is not None else []
    rows.append(f"mode:         {spec.mode}")
    if spec.container_name is not None:
        rows.append(f"container:    {spec.container_name}")
    rows.append(f"url:          {spec.base_url} (serves {spec.served_model_name})")
    rows.append(f"recipe hash:  {spec.recipe_hash}")
    rows.append("argv:")
    lines = [shlex.join(line) for line in argv_lines(spec)]
    for number, line in enumerate(lines):
        indent = "  " if number == 0 else "      "
        continuation = " \\" if number < len(lines) - 1 else ""
        rows.append(f"{indent}{line}{continuation}")
    where = "passed with -e" if spec.mode is not LaunchMode.PROCESS else "added to fleetd's"
    rows.append(f"environment ({where}):")
    rows += [f"  {name}={shlex.quote(value)}" for name, value in sorted(spec.env.items())]
    if spec.preset_overrides:
        rows.append("preset flags overridden by extra_args:")
        for override in spec.preset_overrides:
            verb = "turned off by" if override.dropped else "->"
            preset_flag = shlex.join(override.preset_tokens)
            rows.append(f"  {preset_flag} {verb} {shlex.join(override.recipe_tokens)}")
    if spec.waivers:
        rows.append("lint rules waived ([lint] waive):")
        rows += [f"  {rule}: {why}" for rule, why in sorted(spec.waivers.items())]
    return "\n".join(rows) + "\n"


def _diff_view(spec: LaunchSpec) -> list[str]:
    view = [f"mode {spec.mode}"]
    view += [f"argv {shlex.join(line)}" for line in argv_lines(spec)]
    view += [f"env {name}={value}" for name, value in sorted(spec.env.items())]
    return view


def diff_specs(
    old: LaunchSpec, new: LaunchSpec, *, old_label: str = "old", new_label: str = "new"
) -> list[str]:
    """Unified-diff lines between two launches (argv per flag, env per variable); [] if equal."""
    return list(
        difflib.unified_diff(
            _diff_view(old), _diff_view(new), fromfile=old_label, tofile=new_label, lineterm=""
        )
    )
