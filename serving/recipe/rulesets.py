"""Rule sets of one model build each, chosen by the recipe's ``family`` (or its evidence).

``dsv4-flash`` is the DeepSeek V4 Flash sm_80 fork the seeds measured (haosdent's branch
with allover326's patches): its row-chunk patch, its DSpark drafter on the last pipeline
rank, its allocator and its memory ceiling. ``dsv41-flash`` is a V4.1 build, whose
parsers are ``deepseek_v41``. Nothing here applies to a recipe of another build: GLM and
Qwen run ``mtp`` speculation, ``expandable_segments`` and 0.97 on purpose.

A family's rules come in two parts: ``rules`` hold for the model whatever serves it (the
partition, ``--enforce-eager``, the reasoning parser), ``fork_rules`` only for the fork the
seeds measured (its row-chunk patch, the spawn method, its DSpark, its pipeline-parallel
design, its memory ceiling), applied only with evidence of the fork
(``family_evidence.fork_evidence``). A family may also override a generic rule by id when
its fork rule is the stricter form of it (DSV4's memory ceiling replaces the generic "too
high" warning); the override goes with the fork rules.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from serving.recipe.families import DSV4_FLASH, DSV41_FLASH
from serving.recipe.findings import Finding
from serving.recipe.lint_context import LintContext, Setting, env_key, invalid
from serving.recipe.recipe import show_value
from serving.recipe.rules_generic import (
    Rule,
    memory_fraction,
    partition,
    pp_size,
    shown_partition,
    tp_size,
)

DSPARK_TOKENS = 5
ROW_CHUNK = 64
MAX_GPU_MEMORY_UTILIZATION = 0.965

ROW_CHUNK_ENV = "DSV4_LOGITS_ROW_CHUNK"
MULTIPROC_ENV = "VLLM_WORKER_MULTIPROC_METHOD"
ALLOC_CONF_ENV = "PYTORCH_CUDA_ALLOC_CONF"
ENGRAM_ENV = "DSV41_ENGRAM_STORAGE"


@dataclass(frozen=True)
class RuleSet:
    """The rules of one family, the ids they can report, and generic ids they replace."""

    rules: tuple[Rule, ...]
    rule_ids: frozenset[str]
    overrides: frozenset[str] = frozenset()
    fork_rules: tuple[Rule, ...] = ()


def _rule_partition_missing(ctx: LintContext) -> list[Finding]:
    pp, _ = pp_size(ctx)
    setting, _ = partition(ctx)
    if setting is not None or pp is None or pp <= 1:
        return []
    reason = (
        "without a partition vLLM splits the layers evenly and the last rank, which "
        "also holds lm_head and the DSpark drafter, runs out first; the seeds' "
        "12,12,12,7 (4 cards) / 15,15,13 (3 cards) grew the KV pool about 85%"
    )
    return [Finding("partition-missing", "warning", "layer_partition", "", reason)]


def _rule_partition_tail(ctx: LintContext) -> list[Finding]:
    """A last rank heavier than another: it also carries lm_head (and DSpark's drafter)."""
    setting, _ = partition(ctx)
    if setting is None or len(setting.value) < 2:
        return []
    layers: list[int] = setting.value
    if layers[-1] <= min(layers[:-1]):
        return []
    reason = (
        "the last rank also carries lm_head and the DSpark drafter and runs out of memory "
        "first: give it fewer layers than the others, as the recipes do (15,15,13 on 3 "
        "cards, 12,12,12,7 on 4)"
    )
    return [
        Finding("partition-tail", "warning", setting.key, shown_partition(ctx, setting), reason)
    ]


def _rule_engram_storage(ctx: LintContext) -> list[Finding]:
    """V4.1's Engram in host memory fails silently (alanoo, 2026-10-27)."""
    value = ctx.env.get(ENGRAM_ENV)
    if value is None or value.strip().lower() != "host":
        return []
    reason = (
        "the Engram host mode fails silently: layers 1 and 14 act as identity functions, "
        "15 of 20 exact copies, identifiers lose their '_' separators, and decode speed "
        "does not show it; use ssd (as GNmac's build does)"
    )
    return [Finding("engram-storage", "warning", env_key(ENGRAM_ENV), value, reason)]


def _speculative(ctx: LintContext) -> tuple[dict[str, Setting], list[Finding]]:
    """``method`` and ``num_speculative_tokens`` from [speculative] or --speculative-config."""
    if ctx.recipe.speculative is not None and ctx.recipe.speculation is None:
        return {}, []  # switched off: served without speculation
    spec = ctx.recipe.speculation
    if spec is not None:
        return {
            "method": Setting("speculative.method", spec.method),
            "num_speculative_tokens": Setting(
                "speculative.num_speculative_tokens", spec.num_speculative_tokens
            ),
        }, []
    group = ctx.flag("--speculative-config")
    if group is None:
        return {}, []
    try:
        config = json.loads(group.value)
    except json.JSONDecodeError as exc:
        return {}, [invalid(group.name, group.value, f"not JSON: {exc.msg}")]
    if not isinstance(config, dict):
        return {}, [invalid(group.name, group.value, "should be a JSON object")]
    return {name: Setting(group.name, value) for name, value in config.items()}, []


def _rule_speculative(ctx: LintContext) -> list[Finding]:
    settings, findings = _speculative(ctx)
    method = settings.get("method")
    tokens = settings.get("num_speculative_tokens")
    method_name = str(method.value).lower() if method is not None else ""
    if method is not None and method_name == "mtp":
        reason = "fails on this build with KeyError mtp_block.main_norm; use method 'dspark'"
        findings.append(Finding("speculative-method", "error", method.key, method_name, reason))
    if method_name == "dspark" and tokens is not None and tokens.value != DSPARK_TOKENS:
        reason = f"DSpark needs exactly {DSPARK_TOKENS} speculative tokens (7 gave 60 vs 98 tok/s)"
        findings.append(
            Finding("speculative-tokens", "error", tokens.key, show_value(tokens.value), reason)
        )
    return findings


def _rule_tensor_parallel(ctx: LintContext) -> list[Finding]:
    """The fork is built for pipeline parallel: TP over Gen2 x4 without P2P loses (seeds)."""
    tp, _ = tp_size(ctx)
    group = ctx.flag("--tensor-parallel-size", "-tp")
    if group is None or tp is None or tp <= 1:
        return []
    settings, _ = _speculative(ctx)
    method = settings.get("method")
    if method is not None and str(method.value).lower() == "dspark":
        reason = (
            "DSpark under tensor parallel goes negative above about 8 concurrent requests "
            "(under pipeline parallel it keeps winning up to 64): this fork is built for PP "
            "with DSpark; use pipeline_parallel_size instead"
        )
        return [Finding("tensor-parallel", "error", group.name, group.value, reason)]
    reason = (
        "this fork is built for pipeline parallel: on Gen2 x4 links without P2P, PP4 "
        "measured 6.6x TP4 on prefill (5,321 vs 801 tok/s at 77k; TP runs 86 all-reduces per "
        "forward pass); use pipeline_parallel_size instead"
    )
    return [Finding("tensor-parallel", "warning", group.name, group.value, reason)]


def _rule_enforce_eager(ctx: LintContext) -> list[Finding]:
    group = ctx.flag("--enforce-eager")
    if group is None or group.value.lower() in {"false", "0", "no"}:
        return []
    reason = "drops decode to 8 to 10 tok/s, worse than no speculation at all"
    return [Finding("enforce-eager", "error", group.name, group.shown, reason)]


def _rule_row_chunk(ctx: LintContext) -> list[Finding]:
    key = env_key(ROW_CHUNK_ENV)
    value = ctx.env.get(ROW_CHUNK_ENV)
    if value is not None and "$" in value:
        return []  # a launcher script computes it: not known here
    if value is None or value.strip() in {"", "0"}:
        reason = (
            f"unset or 0 leaves the row-chunk patch inert: the ~134k context wall and "
            f"Xid 31 come back; set {ROW_CHUNK}"
        )
        return [Finding("row-chunk-unset", "error", key, value or "", reason)]
    try:
        chunk = int(value)
    except ValueError:
        return [invalid(key, value, "should be an integer such as 64")]
    if chunk > ROW_CHUNK:
        reason = (
            f"above {ROW_CHUNK} accumulating chats crash (128 died at ~720k tokens with an "
            f"illegal memory access); use {ROW_CHUNK} for chats and agents"
        )
        return [Finding("row-chunk-high", "warning", key, value, reason)]
    return []


def _reasoning_parser_rule(parser: str) -> Rule:
    def rule(ctx: LintContext) -> list[Finding]:
        if ctx.flag("--reasoning-parser") is not None:
            return []
        reason = (
            "without it thinking text lands unmarked in content once thinking is on; "
            f"set it even with thinking off ({parser})"
        )
        return [Finding("reasoning-parser", "warning", "--reasoning-parser", "", reason)]

    return rule


def _rule_v41_parsers(ctx: LintContext) -> list[Finding]:
    """V4.1 builds use the ``deepseek_v41`` parsers (seeds); V4's leak its tool calls."""
    findings = []
    for flag in ("--tool-call-parser", "--reasoning-parser"):
        group = ctx.flag(flag)
        if group is not None and group.value == "deepseek_v4":
            reason = "V4.1 builds use the deepseek_v41 parsers (the V4 ones leak on V4.1)"
            findings.append(Finding("v41-parser", "warning", group.name, group.value, reason))
    return findings


def _rule_env(ctx: LintContext) -> list[Finding]:
    findings = []
    method = ctx.env.get(MULTIPROC_ENV)
    if method != "spawn" and "$" not in (method or ""):
        reason = "must be 'spawn': fork deadlocks once CUDA is initialised"
        findings.append(
            Finding("multiproc-method", "error", env_key(MULTIPROC_ENV), method or "", reason)
        )
    alloc = ctx.env.get(ALLOC_CONF_ENV, "")
    if "expandable_segments:true" in alloc.replace(" ", "").lower():
        reason = (
            "expandable_segments:True hard-fails at model load on this build "
            "('cannot map 20 MB'); leave it unset"
        )
        findings.append(
            Finding("expandable-segments", "error", env_key(ALLOC_CONF_ENV), alloc, reason)
        )
    return findings


def _rule_memory_ceiling(ctx: LintContext) -> list[Finding]:
    setting, fraction, findings = memory_fraction(ctx)
    if setting is None or fraction is None or findings:
        return findings
    if fraction > MAX_GPU_MEMORY_UTILIZATION:
        reason = f"above about {MAX_GPU_MEMORY_UTILIZATION} has crashed 3-card rigs; 0.85 is proven"
        return [Finding("gpu-memory-utilization", "error", setting.key, str(setting.value), reason)]
    return []


DSV4_RULES = RuleSet(
    rules=(
        _rule_partition_missing,
        _rule_partition_tail,
        _rule_enforce_eager,
        _reasoning_parser_rule("deepseek_v4"),
    ),
    fork_rules=(
        _rule_speculative,
        _rule_tensor_parallel,
        _rule_row_chunk,
        _rule_env,
        _rule_memory_ceiling,
    ),
    rule_ids=frozenset(
        {
            "partition-missing",
            "partition-tail",
            "speculative-method",
            "speculative-tokens",
            "tensor-parallel",
            "enforce-eager",
            "row-chunk-unset",
            "row-chunk-high",
            "reasoning-parser",
            "multiproc-method",
            "expandable-segments",
            "gpu-memory-utilization",
        }
    ),
    overrides=frozenset({"gpu-memory-high"}),
)
DSV41_RULES = RuleSet(
    rules=(_reasoning_parser_rule("deepseek_v41"), _rule_v41_parsers, _rule_engram_storage),
    rule_ids=frozenset({"reasoning-parser", "v41-parser", "engram-storage"}),
)

RULE_SETS: dict[str, RuleSet] = {DSV4_FLASH.name: DSV4_RULES, DSV41_FLASH.name: DSV41_RULES}
