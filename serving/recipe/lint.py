"""The recipe linter: what the seeds learned the hard way, checked before a cold start.

Each rule has an id, names the recipe key it is about (or the flag, for ``extra_args``),
the offending value and the reason, taken from the seeds (see DOMAIN.md, "The engine").
Rules about the recipe itself are errors when the launch would crash, wedge a card or
lose most of the throughput, warnings when it only degrades; rules that depend on this
host (port taken, model path or program missing) are always warnings, since the recipe
may be meant for another machine. ``exit_code`` maps findings to ``recipe lint``'s status.

A flag is found however it is written: from a typed key (``gpu_memory_utilization``) or
in ``extra_args`` as ``--flag value`` or ``--flag=value``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serving.recipe.findings import EXIT_CLEAN, EXIT_ERRORS, EXIT_WARNINGS, Finding, exit_code
from serving.recipe.flags import FlagGroup, find_flag, split_flags
from serving.recipe.recipe import (
    PARTITION_ENV,
    PYTHON_PLACEHOLDER,
    Recipe,
    RecipeError,
    parse_recipe_table,
    read_recipe_table,
    shm_size_bytes,
    show_value,
)
from serving.runtime import ports

__all__ = [
    "DSV4_LAYERS",
    "EXIT_CLEAN",
    "EXIT_ERRORS",
    "EXIT_WARNINGS",
    "Finding",
    "exit_code",
    "lint_path",
    "lint_recipe",
]

PortProbe = Callable[[str, int], bool]

DSV4_LAYERS = 43
DSPARK_TOKENS = 5
ROW_CHUNK = 64
MIN_SHM_BYTES = 16 << 30
MAX_GPU_MEMORY_UTILIZATION = 0.965

ROW_CHUNK_ENV = "DSV4_LOGITS_ROW_CHUNK"
MULTIPROC_ENV = "VLLM_WORKER_MULTIPROC_METHOD"
ALLOC_CONF_ENV = "PYTORCH_CUDA_ALLOC_CONF"

# Flags the builder emits from typed keys: giving them in extra_args too is ambiguous.
_TYPED_FLAG_KEYS: dict[str, str] = {
    "--pipeline-parallel-size": "pipeline_parallel_size",
    "-pp": "pipeline_parallel_size",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--max-model-len": "max_model_len",
    "--gpu-memory-utilization": "gpu_memory_utilization",
    "--served-model-name": "served_model_name",
    "--speculative-config": "speculative",
    "--host": "host",
    "--port": "port",
}
_ALWAYS_EMITTED = frozenset({"host", "port"})
_CONTAINER_ONLY_KEYS = (
    "image",
    "shm_size",
    "mounts",
    "ipc_host",
    "container_name",
    "gpus",
    "container_port",
)


@dataclass(frozen=True)
class _Setting:
    """An effective value and the recipe key (or flag) it came from."""

    key: str
    value: Any


def _env_key(name: str) -> str:
    return f"env.{name}"


class _Context:
    """A recipe with its ``extra_args`` split into flags, read by every rule."""

    def __init__(self, recipe: Recipe, layers: int) -> None:
        self.recipe = recipe
        self.layers = layers
        self.flags: list[FlagGroup] = split_flags(recipe.extra_args)
        self.env = recipe.env

    def flag(self, *names: str) -> FlagGroup | None:
        return find_flag(self.flags, *names)

    def setting(self, key: str, *flags: str) -> _Setting | None:
        """A typed key's value, else the flag's value from ``extra_args``, else None."""
        value = getattr(self.recipe, key)
        if value is not None:
            return _Setting(key, value)
        group = self.flag(*flags)
        if group is not None:
            return _Setting(group.name, group.value)
        return None


def _invalid(key: str, value: str, reason: str) -> Finding:
    return Finding("invalid-value", "error", key, value, reason)


def _rule_duplicate_flags(ctx: _Context) -> list[Finding]:
    findings = []
    for group in ctx.flags:
        key = _TYPED_FLAG_KEYS.get(group.name)
        if key is None:
            continue
        if key == "host" and ctx.recipe.is_container:
            continue
        if key in _ALWAYS_EMITTED or getattr(ctx.recipe, key) is not None:
            reason = (
                f"also set by the recipe key '{key}'; give it once, there "
                "(vLLM silently keeps the last one)"
            )
            findings.append(Finding("duplicate-flag", "error", group.name, group.shown, reason))
    return findings


def _pp_size(ctx: _Context) -> tuple[int | None, list[Finding]]:
    setting = ctx.setting("pipeline_parallel_size", "--pipeline-parallel-size", "-pp")
    if setting is None:
        return 1, []
    try:
        return int(setting.value), []
    except ValueError:
        return None, [_invalid(setting.key, str(setting.value), "should be an integer")]


def _partition(ctx: _Context) -> tuple[_Setting | None, list[Finding]]:
    from_env = ctx.env.get(PARTITION_ENV)
    env_key = _env_key(PARTITION_ENV)
    typed = ctx.recipe.layer_partition
    if typed is not None:
        findings = []
        joined = ",".join(str(layers) for layers in typed)
        if from_env is not None and from_env.replace(" ", "") != joined:
            reason = f"disagrees with layer_partition = {show_value(list(typed))}, which wins"
            findings.append(Finding("partition-conflict", "error", env_key, from_env, reason))
        return _Setting("layer_partition", list(typed)), findings
    if from_env is None:
        return None, []
    try:
        layers = [int(part) for part in from_env.split(",")]
    except ValueError:
        return None, [_invalid(env_key, from_env, "should be comma-separated integers")]
    return _Setting(env_key, layers), []


def _rule_partition(ctx: _Context) -> list[Finding]:
    pp_size, findings = _pp_size(ctx)
    partition, more = _partition(ctx)
    findings += more
    if partition is None:
        if pp_size is not None and pp_size > 1:
            reason = (
                "without a partition vLLM splits the layers evenly and the last rank, which "
                "also holds lm_head and the DSpark drafter, runs out first; the seeds' "
                "12,12,12,7 (4 cards) / 15,15,13 (3 cards) grew the KV pool about 85%"
            )
            findings.append(Finding("partition-missing", "warning", "layer_partition", "", reason))
        return findings
    layers: list[int] = partition.value
    shown = show_value(layers) if partition.key == "layer_partition" else ctx.env[PARTITION_ENV]
    if pp_size is not None and len(layers) != pp_size:
        reason = (
            f"{len(layers)} entries for pipeline_parallel_size {pp_size}: "
            "the partition needs one entry per pipeline rank"
        )
        findings.append(Finding("partition-count", "error", partition.key, shown, reason))
    if sum(layers) != ctx.layers:
        reason = (
            f"sums to {sum(layers)} layers; DeepSeek V4 Flash has {ctx.layers} "
            "(seeds: 12,12,12,7 on 4 cards, 15,15,13 on 3)"
        )
        findings.append(Finding("partition-sum", "error", partition.key, shown, reason))
    return findings


def _speculative(ctx: _Context) -> tuple[dict[str, _Setting], list[Finding]]:
    """``method`` and ``num_speculative_tokens`` from [speculative] or --speculative-config."""
    spec = ctx.recipe.speculative
    if spec is not None:
        return {
            "method": _Setting("speculative.method", spec.method),
            "num_speculative_tokens": _Setting(
                "speculative.num_speculative_tokens", spec.num_speculative_tokens
            ),
        }, []
    group = ctx.flag("--speculative-config")
    if group is None:
        return {}, []
    try:
        config = json.loads(group.value)
    except json.JSONDecodeError as exc:
        return {}, [_invalid(group.name, group.value, f"not JSON: {exc.msg}")]
    if not isinstance(config, dict):
        return {}, [_invalid(group.name, group.value, "should be a JSON object")]
    return {name: _Setting(group.name, value) for name, value in config.items()}, []


def _rule_speculative(ctx: _Context) -> list[Finding]:
    settings, findings = _speculative(ctx)
    method = settings.get("method")
    tokens = settings.get("num_speculative_tokens")
    method_name = str(method.value).lower() if method is not None else ""
    if method is not None and method_name == "mtp":
        reason = "fails on this stack with KeyError mtp_block.main_norm; use method 'dspark'"
        findings.append(Finding("speculative-method", "error", method.key, method_name, reason))
    if method_name == "dspark" and tokens is not None and tokens.value != DSPARK_TOKENS:
        reason = f"DSpark needs exactly {DSPARK_TOKENS} speculative tokens (7 gave 60 vs 98 tok/s)"
        findings.append(
            Finding("speculative-tokens", "error", tokens.key, show_value(tokens.value), reason)
        )
    return findings


def _rule_enforce_eager(ctx: _Context) -> list[Finding]:
    group = ctx.flag("--enforce-eager")
    if group is None or group.value.lower() in {"false", "0", "no"}:
        return []
    reason = "drops decode to 8 to 10 tok/s, worse than no speculation at all"
    return [Finding("enforce-eager", "error", group.name, group.shown, reason)]


def _rule_row_chunk(ctx: _Context) -> list[Finding]:
    key = _env_key(ROW_CHUNK_ENV)
    value = ctx.env.get(ROW_CHUNK_ENV)
    if value is None or value.strip() in {"", "0"}:
        reason = (
            f"unset or 0 leaves the row-chunk patch inert: the ~134k context wall and "
            f"Xid 31 come back; set {ROW_CHUNK}"
        )
        return [Finding("row-chunk-unset", "error", key, value or "", reason)]
    try:
        chunk = int(value)
    except ValueError:
        return [_invalid(key, value, "should be an integer such as 64")]
    if chunk > ROW_CHUNK:
        reason = (
            f"above {ROW_CHUNK} accumulating chats crash (128 died at ~720k tokens with an "
            f"illegal memory access); use {ROW_CHUNK} for chats and agents"
        )
        return [Finding("row-chunk-high", "warning", key, value, reason)]
    return []


def _rule_parsers(ctx: _Context) -> list[Finding]:
    findings = []
    if ctx.flag("--reasoning-parser") is None:
        reason = (
            "without it thinking text lands unmarked in content once thinking is on; "
            "set it even with thinking off (deepseek_v4)"
        )
        findings.append(Finding("reasoning-parser", "warning", "--reasoning-parser", "", reason))
    auto = ctx.flag("--enable-auto-tool-choice")
    if auto is not None and ctx.flag("--tool-call-parser") is None:
        reason = "vLLM refuses to start: it needs --tool-call-parser (deepseek_v4)"
        findings.append(Finding("tool-call-parser", "error", auto.name, auto.shown, reason))
    return findings


def _rule_preset_flags(ctx: _Context) -> list[Finding]:
    """A preset's switch turned off in ``extra_args`` (``--no-X``) is an error.

    The presets carry the flags the seeds' reference launch needs (remote code, tokenizer,
    parsers, block size, sequence cap); losing one costs a 20 to 45 minute cold start of a
    broken engine, so it is not left to a warning.
    """
    findings = []
    for override in ctx.recipe.preset_overrides:
        if not override.dropped:
            continue
        given = split_flags(override.recipe_tokens)[0]
        reason = (
            f"turns off the preset's {' '.join(override.preset_tokens)}, which its launch "
            "needs; extra_args adds to the preset's flags, so give the flag again only to "
            "change its value"
        )
        findings.append(Finding("preset-flag-dropped", "error", given.name, given.shown, reason))
    return findings


def _rule_env(ctx: _Context) -> list[Finding]:
    findings = []
    method = ctx.env.get(MULTIPROC_ENV)
    if method != "spawn":
        reason = "must be 'spawn': fork deadlocks once CUDA is initialised"
        findings.append(
            Finding("multiproc-method", "error", _env_key(MULTIPROC_ENV), method or "", reason)
        )
    alloc = ctx.env.get(ALLOC_CONF_ENV, "")
    if "expandable_segments:true" in alloc.replace(" ", "").lower():
        reason = "expandable_segments:True is known bad on this stack; leave it unset"
        findings.append(
            Finding("expandable-segments", "error", _env_key(ALLOC_CONF_ENV), alloc, reason)
        )
    return findings


def _rule_shm(ctx: _Context) -> list[Finding]:
    recipe = ctx.recipe
    if not recipe.is_container or recipe.ipc_host:
        return []
    reason = (
        "the workers need at least 16g of /dev/shm (the 64m default is far too small); "
        'set shm_size = "16g" or ipc_host = true'
    )
    if recipe.shm_size is None or shm_size_bytes(recipe.shm_size) < MIN_SHM_BYTES:
        return [Finding("shm-size", "error", "shm_size", recipe.shm_size or "", reason)]
    return []


def _rule_memory(ctx: _Context) -> list[Finding]:
    setting = ctx.setting("gpu_memory_utilization", "--gpu-memory-utilization")
    if setting is None:
        return []
    try:
        fraction = float(setting.value)
    except ValueError:
        return [_invalid(setting.key, str(setting.value), "should be a number")]
    if fraction > MAX_GPU_MEMORY_UTILIZATION:
        reason = f"above about {MAX_GPU_MEMORY_UTILIZATION} has crashed 3-card rigs; 0.85 is proven"
        return [Finding("gpu-memory-utilization", "error", setting.key, str(setting.value), reason)]
    return []


def _rule_ignored_keys(ctx: _Context) -> list[Finding]:
    if ctx.recipe.is_container:
        return []
    reason = "only used in docker and podman modes; ignored in process mode"
    findings = []
    for key in _CONTAINER_ONLY_KEYS:
        value = getattr(ctx.recipe, key)
        if value != Recipe.model_fields[key].get_default(call_default_factory=True):
            findings.append(Finding("ignored-key", "warning", key, show_value(value), reason))
    return findings


_RULES: tuple[Callable[[_Context], list[Finding]], ...] = (
    _rule_duplicate_flags,
    _rule_partition,
    _rule_speculative,
    _rule_enforce_eager,
    _rule_row_chunk,
    _rule_parsers,
    _rule_preset_flags,
    _rule_env,
    _rule_shm,
    _rule_memory,
    _rule_ignored_keys,
)


def _looks_like_path(text: str) -> bool:
    """Absolute, home or explicitly relative; a bare name or ``org/model`` is a hub id."""
    return text.startswith(("/", "~", "./", "../"))


def _program_found(program: str) -> bool:
    if os.sep in program:
        return os.access(Path(program).expanduser(), os.X_OK)
    return shutil.which(program) is not None


def _host_findings(recipe: Recipe, probe: PortProbe, python: str) -> list[Finding]:
    findings = []
    if recipe.port != 0:
        try:
            taken = probe(recipe.host, recipe.port)
        except OSError as exc:
            reason = f"cannot bind {recipe.host}: {exc.strerror or exc}"
            findings.append(Finding("port-check", "warning", "host", recipe.host, reason))
        else:
            if taken:
                reason = f"something already listens on {recipe.host}:{recipe.port}"
                findings.append(Finding("port-in-use", "warning", "port", str(recipe.port), reason))
    if recipe.is_container:
        if shutil.which(recipe.mode) is None:
            reason = f"`{recipe.mode}` is not on PATH"
            findings.append(Finding("command-not-found", "warning", "mode", recipe.mode, reason))
        for index, mount in enumerate(recipe.mounts):
            source = mount.split(":")[0]
            if _looks_like_path(source) and not Path(source).expanduser().exists():
                reason = f"mount source {source} does not exist on this host"
                findings.append(
                    Finding("mount-source", "warning", f"mounts[{index}]", mount, reason)
                )
        return findings
    program = recipe.command[0].replace(PYTHON_PLACEHOLDER, python)
    if not _program_found(program):
        reason = f"`{program}` is not an executable on PATH"
        findings.append(Finding("command-not-found", "warning", "command", program, reason))
    if _looks_like_path(recipe.model) and not Path(recipe.model).expanduser().exists():
        reason = "no such file or directory on this host"
        findings.append(Finding("model-path", "warning", "model", recipe.model, reason))
    return findings


def lint_recipe(
    recipe_or_table: Recipe | Mapping[str, Any],
    *,
    host_checks: bool = True,
    port_in_use: PortProbe | None = None,
    python: str = sys.executable,
    model_layers: int = DSV4_LAYERS,
) -> list[Finding]:
    """Every finding for a recipe, or for a raw table (then unknown keys are findings too).

    ``host_checks`` adds this host's warnings (port taken, model path, program on PATH);
    ``port_in_use`` replaces the real bind probe; ``python`` resolves ``{python}`` in
    ``command``; ``model_layers`` is what ``layer_partition`` must sum to.
    """
    if isinstance(recipe_or_table, Recipe):
        recipe: Recipe | None = recipe_or_table
        findings: list[Finding] = []
    else:
        recipe, findings = parse_recipe_table(recipe_or_table)
    if recipe is None:
        return findings
    ctx = _Context(recipe, model_layers)
    for rule in _RULES:
        findings += rule(ctx)
    if host_checks:
        findings += _host_findings(recipe, port_in_use or ports.port_in_use, python)
    return findings


def lint_path(
    path: Path,
    *,
    host_checks: bool = True,
    port_in_use: PortProbe | None = None,
    python: str = sys.executable,
) -> list[Finding]:
    """``lint_recipe`` on a TOML file; an unreadable file or bad TOML is one error finding."""
    try:
        table = read_recipe_table(path)
    except RecipeError as exc:
        return [Finding("unreadable", "error", "", str(path), str(exc))]
    return lint_recipe(table, host_checks=host_checks, port_in_use=port_in_use, python=python)
