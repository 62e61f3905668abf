"""A recipe without ``family`` gets the rule set its evidence points at: the checkpoint's
config.json, then the build's flags and environment, then the model's name; a V4.1 mark
outweighs V4 marks (V4.1 builds keep them); ``family = "none"`` opts out; a note names the
evidence. Fits-the-cards knows the V4 Flash checkpoint's size when the weights are not
readable, and tensor parallel on the PP fork is flagged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from serving.recipe.findings import Finding, exit_code
from serving.recipe.lint import RigCards, lint_recipe

# The seeds' reference launch (allover326 run-pp-dspark.sh + SETTINGS.md) as an owner
# writes it: no ``family`` key.
SEED: dict[str, Any] = {
    "mode": "docker",
    "image": "dsv4-a100:devel",
    "model": "/models/DeepSeek-V4-Flash-0731",
    "mounts": ["/models:/models:ro"],
    "shm_size": "16g",
    "pipeline_parallel_size": 4,
    "layer_partition": [12, 12, 12, 7],
    "kv_cache_dtype": "fp8",
    "gpu_memory_utilization": 0.85,
    "extra_args": [
        "--block-size",
        "256",
        "--max-num-batched-tokens",
        "2048",
        "--max-num-seqs",
        "8",
        "--trust-remote-code",
        "--no-enable-flashinfer-autotune",
        "--tokenizer-mode",
        "deepseek_v4",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "deepseek_v4",
        "--reasoning-parser",
        "deepseek_v4",
    ],
    "speculative": {"method": "dspark", "num_speculative_tokens": 5},
    "env": {"VLLM_WORKER_MULTIPROC_METHOD": "spawn", "DSV4_LOGITS_ROW_CHUNK": "64"},
}
# A V4.1 build's launch (Zanooda/Morrowmake style): V4 tokenizer mode, V4.1 parsers.
V41: dict[str, Any] = {
    **SEED,
    "image": "dsv41-a100:devel",
    "model": "/models/dsv41-flash",
    "layer_partition": [11, 11, 11, 7],
    "extra_args": [
        "--tokenizer-mode",
        "deepseek_v4",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "deepseek_v41",
        "--reasoning-parser",
        "deepseek_v41",
    ],
}


def lint(table: dict[str, Any], **kwargs: Any) -> list[Finding]:
    return lint_recipe(table, host_checks=False, **kwargs)


def problems(findings: list[Finding]) -> list[tuple[str, str, str]]:
    return [(f.rule, f.severity, f.key) for f in findings if f.severity != "note"]


def family_note(findings: list[Finding]) -> Finding | None:
    return next((f for f in findings if f.rule == "family-inferred"), None)


def without_flag(args: list[str], flag: str) -> list[str]:
    index = args.index(flag)
    return args[:index] + args[index + 2 :]


def test_the_seed_launch_without_family_gets_the_fork_rules_and_says_why() -> None:
    findings = lint(SEED)
    assert problems(findings) == []
    note = family_note(findings)
    assert note is not None and note.severity == "note" and note.value == "dsv4-flash"
    assert "chosen by the build's flags and environment" in note.reason
    assert "--tool-call-parser deepseek_v4" in note.reason
    assert 'family = "none"' in note.reason
    assert exit_code(findings) == 0


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"layer_partition": [12, 12, 12, 8]}, "partition-sum"),
        ({"speculative": {"method": "dspark", "num_speculative_tokens": 7}}, "speculative-tokens"),
        ({"extra_args": [*SEED["extra_args"], "--enforce-eager"]}, "enforce-eager"),
        ({"env": {**SEED["env"], "DSV4_LOGITS_ROW_CHUNK": "0"}}, "row-chunk-unset"),
        (
            {"env": {**SEED["env"], "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}},
            "expandable-segments",
        ),
        (
            {"extra_args": without_flag(SEED["extra_args"], "--reasoning-parser")},
            "reasoning-parser",
        ),
        ({"env": {"DSV4_LOGITS_ROW_CHUNK": "64"}}, "multiproc-method"),
        ({"gpu_memory_utilization": 0.97}, "gpu-memory-utilization"),
        ({"layer_partition": None}, "partition-missing"),
    ],
)
def test_the_seed_launchs_bad_variants_are_caught_without_family(
    change: dict[str, Any], rule: str
) -> None:
    table = {k: v for k, v in {**SEED, **change}.items() if v is not None}
    assert rule in {f.rule for f in lint(table) if f.severity != "note"}


def test_the_row_chunk_variable_alone_picks_the_fork() -> None:
    """No parser flags and a neutral path: the build's own variable is evidence enough."""
    table = {**SEED, "model": "/srv/weights/flash", "extra_args": [], "layer_partition": [11] * 4}
    findings = lint(table)
    assert ("partition-sum", "error", "layer_partition") in problems(findings)
    note = family_note(findings)
    assert note is not None and "env DSV4_LOGITS_ROW_CHUNK" in note.reason


def test_the_model_name_is_the_weakest_hint_but_a_hint() -> None:
    """The name picks the model's rules; the fork's own need evidence of the fork."""
    table = {
        "model": "deepseek-ai/DeepSeek-V4-Flash-0731",
        "pipeline_parallel_size": 4,
        "layer_partition": [12, 12, 13, 6],
        "extra_args": ["--enforce-eager"],
    }
    findings = lint(table)
    note = family_note(findings)
    assert note is not None and "chosen by the model name" in note.reason
    assert "fork's own rules" in note.reason and "dsv4-a100" in note.reason
    assert {rule for rule, _, _ in problems(findings)} == {"enforce-eager", "reasoning-parser"}


def test_a_v41_mark_outweighs_the_v4_marks_its_build_keeps() -> None:
    findings = lint({**V41, "env": {**V41["env"], "DSV4_LOGITS_ROW_CHUNK": "64"}})
    assert problems(findings) == []
    note = family_note(findings)
    assert note is not None and note.value == "dsv41-flash"
    assert "--tool-call-parser deepseek_v41" in note.reason
    assert "a V4.1 mark wins" in note.reason
    # Owners run V4.1 with expandable_segments and TP4 + DSpark (GNmac): never refused.
    table = {
        **V41,
        "pipeline_parallel_size": None,
        "layer_partition": None,
        "extra_args": [*V41["extra_args"], "--tensor-parallel-size", "4"],
        "env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    }
    table = {k: v for k, v in table.items() if v is not None}
    assert problems(lint(table, cards=RigCards(count=4))) == []


@pytest.mark.parametrize(
    "model", ["/models/DeepSeek-V4.1-Flash", "/models/deepseek_v4_1", "org/DSV41-Flash-EXL3"]
)
def test_a_v41_name_is_a_v41_hint_even_beside_v4_parsers(model: str) -> None:
    findings = lint({**SEED, "model": model, "layer_partition": [11, 11, 11, 7]})
    note = family_note(findings)
    assert note is not None and note.value == "dsv41-flash"
    # The V4.1 rules: the V4 parsers on a V4.1 build are a warning, nothing refuses.
    assert {rule for rule, severity, _ in problems(findings)} == {"v41-parser"}
    assert exit_code(findings) == 1


def model_dir(root: Path, config: dict[str, Any]) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(config))
    return root


def in_dir(table: dict[str, Any], path: Path) -> dict[str, Any]:
    return {**table, "mounts": [f"{path.parent}:/models:ro"], "model": f"/models/{path.name}"}


def test_a_checkpoint_of_another_model_overrules_the_marks(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "models" / "DeepSeek-V4-Flash", {"model_type": "glm_moe_dsa"})
    table = {**in_dir(SEED, path), "env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}}
    findings = lint(table)
    note = family_note(findings)
    assert note is not None and note.value == "none"
    assert "config.json model_type glm_moe_dsa: another model" in note.reason
    assert problems(findings) == []


@pytest.mark.parametrize(
    ("config", "family", "evidence"),
    [
        (
            {"model_type": "deepseek_v4", "num_hidden_layers": 43},
            "dsv4-flash",
            "config.json model_type deepseek_v4",
        ),
        (
            {"architectures": ["DeepseekV41ForCausalLM"], "text_config": {"num_hidden_layers": 40}},
            "dsv41-flash",
            "config.json architectures DeepseekV41ForCausalLM",
        ),
    ],
)
def test_the_checkpoint_says_which_build_it_is(
    tmp_path: Path, config: dict[str, Any], family: str, evidence: str
) -> None:
    path = model_dir(tmp_path / "models" / "weights", config)
    table = {"model": str(path), "pipeline_parallel_size": 2, "layer_partition": [30, 30]}
    findings = lint(table)
    note = family_note(findings)
    assert note is not None and note.value == family
    assert "chosen by the checkpoint's config.json" in note.reason and evidence in note.reason


def test_family_none_opts_out_and_an_explicit_family_wins() -> None:
    bad = {**SEED, "extra_args": [*SEED["extra_args"], "--enforce-eager"]}
    opted_out = lint({**bad, "family": "none"})
    assert problems(opted_out) == [] and family_note(opted_out) is None
    findings = lint({**bad, "family": "dsv41-flash"})
    assert family_note(findings) is None
    assert "enforce-eager" not in {f.rule for f in findings}


def test_other_models_get_no_note() -> None:
    glm = {
        "model": "/models/GLM-5.3-INT4",
        "pipeline_parallel_size": 8,
        "layer_partition": [10, 10, 10, 10, 10, 10, 10, 8],
        "num_layers": 78,
        "speculative": {"method": "dspark", "num_speculative_tokens": 3},  # DSpark is no mark
        "env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    }
    assert lint(glm) == []


# --- fits-the-cards without the weights, tensor parallel on the fork -------------------


def test_two_cards_cannot_hold_v4_flash_even_unread() -> None:
    table = {**SEED, "pipeline_parallel_size": 2, "gpus": "0,1", "layer_partition": [22, 21]}
    findings = lint(table)
    (fit,) = [f for f in findings if f.rule == "fits-cards"]
    assert (fit.severity, fit.key) == ("error", "model")
    assert "about 155.4 GiB" in fit.value and "not readable here" in fit.value
    assert "DeepSeek-V4-Flash-0731 checkpoint" in fit.reason
    assert "cannot fit on 2 cards x 64 GiB at 0.85" in fit.reason
    assert exit_code(findings) == 2


@pytest.mark.parametrize(("pp", "partition"), [(3, [15, 15, 13]), (4, [12, 12, 12, 7])])
def test_three_and_four_cards_hold_it(pp: int, partition: list[int]) -> None:
    table = {**SEED, "pipeline_parallel_size": pp, "layer_partition": partition}
    assert problems(lint(table)) == []


def test_tensor_parallel_on_the_pp_fork() -> None:
    tp4 = {
        **SEED,
        "pipeline_parallel_size": None,
        "layer_partition": None,
        "extra_args": [*SEED["extra_args"], "--tensor-parallel-size", "4"],
    }
    tp4 = {k: v for k, v in tp4.items() if v is not None}
    (with_dspark,) = [f for f in lint(tp4) if f.rule == "tensor-parallel"]
    assert (with_dspark.severity, with_dspark.key) == ("error", "--tensor-parallel-size")
    assert "above about 8 concurrent requests" in with_dspark.reason
    plain = {k: v for k, v in tp4.items() if k != "speculative"}
    (warning,) = [f for f in lint(plain) if f.rule == "tensor-parallel"]
    assert warning.severity == "warning"
    assert "6.6x" in warning.reason and "5,321 vs 801 tok/s" in warning.reason
