"""The generic vLLM rules: true of every model and image, so every recipe gets them.

Flags that exist (a near miss of a real flag, a typed key given again as a flag, a tool
choice with no parser), parallel sizes against the cards, the partition's count (one
entry per pipeline rank) and sum (the model's layers, when known), the memory fraction's
bounds, the container's shared memory, keys a mode ignores. What only one build needs
(the DeepSeek V4 Flash fork's environment, DSpark's token count) is in ``rulesets``.
"""

from __future__ import annotations

from collections.abc import Callable

from serving.recipe.findings import Finding
from serving.recipe.flags import split_flags
from serving.recipe.lint_context import LintContext, Setting, env_key, invalid
from serving.recipe.recipe import PARTITION_ENV, Recipe, shm_size_bytes, show_value
from serving.recipe.vllm_flags import near_miss

Rule = Callable[[LintContext], list[Finding]]

MIN_SHM_BYTES = 16 << 30
# Above this vLLM leaves too little for the CUDA context, NCCL buffers and activations.
HIGH_GPU_MEMORY_UTILIZATION = 0.98

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
    "container_port",
)


def rule_duplicate_flags(ctx: LintContext) -> list[Finding]:
    """A typed key's flag given again in ``extra_args``: vLLM keeps the last one."""
    findings = []
    for group in ctx.flags:
        key = _TYPED_FLAG_KEYS.get(group.name)
        if key is None:
            continue
        if key == "host" and ctx.recipe.is_container:
            continue
        typed = ctx.recipe.speculation if key == "speculative" else getattr(ctx.recipe, key)
        if key in _ALWAYS_EMITTED or typed is not None:
            reason = (
                f"also set by the recipe key '{key}'; give it once, there "
                "(vLLM silently keeps the last one)"
            )
            findings.append(Finding("duplicate-flag", "error", group.name, group.shown, reason))
    return findings


def rule_flag_typos(ctx: LintContext) -> list[Finding]:
    """A flag that is a near miss of a real vLLM flag (vLLM would refuse it at start)."""
    findings = []
    for group in ctx.flags:
        meant = near_miss(group.name)
        if meant is not None:
            reason = f"not a vLLM flag (did you mean '{meant}'?): vLLM refuses it at start"
            findings.append(Finding("unknown-flag", "warning", group.name, group.shown, reason))
    return findings


def pp_size(ctx: LintContext) -> tuple[int | None, list[Finding]]:
    """The pipeline-parallel size (1 when unset), or None with a finding when unreadable."""
    setting = ctx.setting("pipeline_parallel_size", "--pipeline-parallel-size", "-pp")
    if setting is None:
        return 1, []
    try:
        return int(setting.value), []
    except ValueError:
        return None, [invalid(setting.key, str(setting.value), "should be an integer")]


def tp_size(ctx: LintContext) -> tuple[int | None, list[Finding]]:
    """The tensor-parallel size from ``extra_args`` (1 when unset)."""
    group = ctx.flag("--tensor-parallel-size", "-tp")
    if group is None:
        return 1, []
    try:
        return int(group.value), []
    except ValueError:
        return None, [invalid(group.name, group.value, "should be an integer")]


def partition(ctx: LintContext) -> tuple[Setting | None, list[Finding]]:
    """``layer_partition`` or ``VLLM_PP_LAYER_PARTITION`` as a list of integers."""
    from_env = ctx.env.get(PARTITION_ENV)
    key = env_key(PARTITION_ENV)
    typed = ctx.recipe.layer_partition
    if typed is not None:
        findings = []
        joined = ",".join(str(layers) for layers in typed)
        if from_env is not None and from_env.replace(" ", "") != joined:
            reason = f"disagrees with layer_partition = {show_value(list(typed))}, which wins"
            findings.append(Finding("partition-conflict", "error", key, from_env, reason))
        return Setting("layer_partition", list(typed)), findings
    if from_env is None:
        return None, []
    try:
        layers = [int(part) for part in from_env.split(",")]
    except ValueError:
        return None, [invalid(key, from_env, "should be comma-separated integers")]
    return Setting(key, layers), []


def shown_partition(ctx: LintContext, setting: Setting) -> str:
    """The partition as the recipe wrote it (a TOML array, or the env variable's text)."""
    if setting.key == "layer_partition":
        return show_value(setting.value)
    return ctx.env[PARTITION_ENV]


def rule_partition(ctx: LintContext) -> list[Finding]:
    """One entry per pipeline rank; the entries sum to the model's layers (when known)."""
    pp, findings = pp_size(ctx)
    setting, more = partition(ctx)
    findings += more
    if setting is None:
        return findings
    layers: list[int] = setting.value
    shown = shown_partition(ctx, setting)
    if pp is not None and len(layers) != pp:
        reason = (
            f"{len(layers)} entries for pipeline_parallel_size {pp}: "
            "the partition needs one entry per pipeline rank"
        )
        findings.append(Finding("partition-count", "error", setting.key, shown, reason))
    if ctx.layers is None:
        reason = (
            "the model's layer count is unknown (no readable config.json, no num_layers, "
            "no family): the partition's sum is not checked"
        )
        findings.append(Finding("layers-unknown", "note", setting.key, shown, reason))
    elif sum(layers) != ctx.layers:
        reason = f"sums to {sum(layers)} layers; the model has {ctx.layers} ({ctx.layers_source})"
        findings.append(Finding("partition-sum", "error", setting.key, shown, reason))
    return findings


def rule_num_layers(ctx: LintContext) -> list[Finding]:
    """``num_layers`` that the checkpoint's own config.json contradicts."""
    model, given = ctx.model, ctx.recipe.num_layers
    if model is None or model.layers is None or given is None or given == model.layers:
        return []
    reason = f"{model.layers_source} says {model.layers} (which is used)"
    return [Finding("num-layers-mismatch", "warning", "num_layers", str(given), reason)]


def _used_cards(ctx: LintContext) -> tuple[int | None, str]:
    """How many cards the recipe may use, and in words where that number comes from."""
    ids = ctx.recipe.card_ids
    if ids is not None:
        return len(ids), f"gpus = {ctx.recipe.gpus}"
    if ctx.cards.count is not None:
        return ctx.cards.count, f"the rig's {ctx.cards.count} cards"
    return None, ""


def rule_parallel_cards(ctx: LintContext) -> list[Finding]:
    """TP x PP against the cards the recipe names (or the rig's, for ``gpus = "all"``)."""
    tp, findings = tp_size(ctx)
    pp, more = pp_size(ctx)
    findings += more
    cards, source = _used_cards(ctx)
    if tp is None or pp is None or cards is None:
        return findings
    world = tp * pp
    shown = f"{tp} x {pp}" if tp > 1 else str(pp)
    key = "pipeline_parallel_size" if tp == 1 else "--tensor-parallel-size"
    if world > cards:
        reason = f"TP x PP needs {world} cards; {source} gives {cards}"
        findings.append(Finding("parallel-cards", "error", key, shown, reason))
    elif world < cards and ctx.recipe.card_ids is not None:
        reason = (
            f"TP x PP uses {world} cards; {source} names {cards}: the rest are reserved "
            "for nothing (name only the cards the profile runs on)"
        )
        findings.append(Finding("parallel-cards", "warning", key, shown, reason))
    return findings


def rule_tool_parser(ctx: LintContext) -> list[Finding]:
    """``--enable-auto-tool-choice`` without ``--tool-call-parser``: vLLM will not start."""
    auto = ctx.flag("--enable-auto-tool-choice")
    if auto is None or ctx.flag("--tool-call-parser") is not None:
        return []
    reason = "vLLM refuses to start: it needs --tool-call-parser"
    return [Finding("tool-call-parser", "error", auto.name, auto.shown, reason)]


def rule_preset_flags(ctx: LintContext) -> list[Finding]:
    """A preset's switch turned off in ``extra_args`` (``--no-X``) is an error.

    The presets carry the flags their reference launch needs (remote code, tokenizer,
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


def memory_fraction(ctx: LintContext) -> tuple[Setting | None, float | None, list[Finding]]:
    """``gpu_memory_utilization`` (typed or flag) as a number, or a finding."""
    setting = ctx.setting("gpu_memory_utilization", "--gpu-memory-utilization")
    if setting is None:
        return None, None, []
    try:
        return setting, float(setting.value), []
    except ValueError:
        return setting, None, [invalid(setting.key, str(setting.value), "should be a number")]


def rule_memory(ctx: LintContext) -> list[Finding]:
    """The memory fraction within (0, 1]; above 0.98 leaves no room for the rest."""
    setting, fraction, findings = memory_fraction(ctx)
    if setting is None or fraction is None:
        return findings
    if not 0.0 < fraction <= 1.0:
        reason = "a fraction of each card's memory: above 0 and at most 1"
        findings.append(invalid(setting.key, str(setting.value), reason))
    elif fraction > HIGH_GPU_MEMORY_UTILIZATION:
        reason = (
            f"above {HIGH_GPU_MEMORY_UTILIZATION} leaves too little for the CUDA context, "
            "NCCL buffers and activations"
        )
        findings.append(
            Finding("gpu-memory-high", "warning", setting.key, str(setting.value), reason)
        )
    return findings


def rule_shm(ctx: LintContext) -> list[Finding]:
    """A container needs shared memory for its workers (docker's 64m default is too small)."""
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


def rule_ignored_keys(ctx: LintContext) -> list[Finding]:
    """Container keys in process mode do nothing."""
    if ctx.recipe.is_container:
        return []
    reason = "only used in docker and podman modes; ignored in process mode"
    findings = []
    for key in _CONTAINER_ONLY_KEYS:
        value = getattr(ctx.recipe, key)
        if value != Recipe.model_fields[key].get_default(call_default_factory=True):
            findings.append(Finding("ignored-key", "warning", key, show_value(value), reason))
    return findings


GENERIC_RULES: tuple[Rule, ...] = (
    rule_duplicate_flags,
    rule_flag_typos,
    rule_partition,
    rule_num_layers,
    rule_parallel_cards,
    rule_tool_parser,
    rule_preset_flags,
    rule_memory,
    rule_shm,
    rule_ignored_keys,
)
GENERIC_RULE_IDS: frozenset[str] = frozenset(
    {
        "duplicate-flag",
        "unknown-flag",
        "partition-conflict",
        "partition-count",
        "partition-sum",
        "layers-unknown",
        "num-layers-mismatch",
        "parallel-cards",
        "tool-call-parser",
        "preset-flag-dropped",
        "gpu-memory-high",
        "shm-size",
        "ignored-key",
    }
)
