"""Lint on recipes written from the seeds' own launches: the build is known from the build.

The parsers name the model (upstream vLLM has ``deepseek_v4`` too); the fork's own rules
need evidence of the fork (its image, ``DSV4_*`` env, its labels, ``family``). Every trap
the seeds report (docs/domain.md, "Rules a linter can enforce"; the launcher's module reload,
the Engram host mode, a tail-heavy partition) is still caught on the seeds' launches, a
launcher script's exports count as the launch's environment, ``[speculative] enabled =
false`` is the recipes' ``--plain``, and llama-server gets ``-m MODEL``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from serving.recipe.build import build_launch, recipe_hash
from serving.recipe.findings import Finding, exit_code
from serving.recipe.lint import lint_path, lint_recipe
from serving.recipe.recipe import preset_recipe, recipe_from_table
from tests.support.cli import run_fleetctl_here

PARSERS = [
    "--tokenizer-mode", "deepseek_v4",
    "--enable-auto-tool-choice",
    "--tool-call-parser", "deepseek_v4",
    "--reasoning-parser", "deepseek_v4",
]  # fmt: skip
# allover326's run-pp-dspark.sh as a recipe (the container it starts, the seeds' flags).
ALLOVER_PP4: dict[str, Any] = {
    "mode": "docker",
    "image": "dsv4-a100:devel",
    "model": "/models/DeepSeek-V4-Flash-0731",
    "shm_size": "16g",
    "pipeline_parallel_size": 4,
    "layer_partition": [12, 12, 12, 7],
    "kv_cache_dtype": "fp8",
    "gpu_memory_utilization": 0.85,
    "extra_args": [
        "--block-size", "256", "--max-num-batched-tokens", "2048", "--max-num-seqs", "8",
        "--trust-remote-code", "--no-enable-flashinfer-autotune", *PARSERS,
    ],
    "speculative": {"method": "dspark", "num_speculative_tokens": 5},
    "env": {"VLLM_WORKER_MULTIPROC_METHOD": "spawn", "DSV4_LOGITS_ROW_CHUNK": "64"},
}  # fmt: skip
# The 3-card form (robbbbbb's README: VLLM_PP_LAYER_PARTITION=15,15,13).
ALLOVER_PP3: dict[str, Any] = {
    **ALLOVER_PP4,
    "pipeline_parallel_size": 3,
    "layer_partition": None,
    "env": {**ALLOVER_PP4["env"], "VLLM_PP_LAYER_PARTITION": "15,15,13"},
}
# machinezero's CUDA 13.3 rebuild of the container: its own image tag, the env says DSV4.
MACHINEZERO: dict[str, Any] = {
    **ALLOVER_PP4,
    "image": "dsv4-a100:cuda133",
    "shm_size": "32g",
    "ipc_host": True,
    "max_model_len": 1048576,
    "gpu_memory_utilization": 0.92,
    "layer_partition": [11, 11, 11, 10],
    "env": {
        "DSV4_LOGITS_ROW_CHUNK": "64",
        "NCCL_SHM_DISABLE": "1",
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
    },
}
# Schaka's podman launcher (its own image name; the fork shows in its DSV4_* env).
SCHAKA: dict[str, Any] = {
    **ALLOVER_PP4,
    "mode": "podman",
    "image": "localhost/schaka-dsv4:latest",
    "max_model_len": 750000,
    "env": {
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        "DSV4_LOGITS_ROW_CHUNK": "64",
        "DSV4_REP_FUZZY_MIN_HITS": "15",
        "DSV4_RECOVERY_MODE": "nudge",
    },
}
SEED_LAUNCHES = {
    "allover326-pp4": ALLOVER_PP4,
    "allover326-pp3": ALLOVER_PP3,
    "machinezero": MACHINEZERO,
    "schaka": SCHAKA,
}
# An upstream vLLM image with DSV4 backported (ElRoberto538's base), the same parsers, no
# DSV4_* env and no spawn variable: none of the fork's rules are its to act on.
UPSTREAM: dict[str, Any] = {
    "mode": "docker",
    "image": "vllm/vllm-openai:v0.12.0",
    "model": "/models/DeepSeek-V4-Flash-0731",
    "shm_size": "16g",
    "pipeline_parallel_size": 4,
    "layer_partition": [12, 12, 12, 7],
    "extra_args": PARSERS,
}


def lint(table: dict[str, Any], **kwargs: Any) -> list[Finding]:
    clean = {key: value for key, value in table.items() if value is not None}
    return lint_recipe(clean, host_checks=False, model=False, **kwargs)


def rules(findings: list[Finding], *severities: str) -> set[str]:
    wanted = severities or ("error", "warning")
    return {finding.rule for finding in findings if finding.severity in wanted}


def test_an_upstream_image_with_the_parsers_gets_no_fork_errors_and_says_why() -> None:
    findings = lint(UPSTREAM)
    assert rules(findings) == set(), findings
    note = next(f for f in findings if f.rule == "family-inferred")
    assert note.value == "dsv4-flash"
    assert "fork's own rules" in note.reason and "dsv4-a100" in note.reason
    # The model's own rules still hold on it.
    broken = lint({**UPSTREAM, "extra_args": [*PARSERS, "--enforce-eager"]})
    assert rules(broken) == {"enforce-eager"}


@pytest.mark.parametrize(
    ("evidence", "kwargs"),
    [
        ({"image": "dsv4-a100:devel"}, {}),
        ({"image": "registry.lan:5000/team/dsv4-a100@sha256:" + "a" * 64}, {}),
        ({"env": {"DSV4_NUDGE": "0"}}, {}),
        ({"family": "dsv4-flash"}, {}),
        ({}, {"labels": {"dsv4.patch-series": "0001-0023"}}),
    ],
    ids=["image", "image-by-digest", "env", "family", "labels"],
)
def test_any_evidence_of_the_fork_brings_its_rules_back(
    evidence: dict[str, Any], kwargs: dict[str, Any]
) -> None:
    findings = lint({**UPSTREAM, **evidence}, **kwargs)
    assert {"row-chunk-unset", "multiproc-method"} <= rules(findings, "error"), findings


@pytest.mark.parametrize("name", sorted(SEED_LAUNCHES))
def test_the_seeds_launches_lint_without_errors(name: str) -> None:
    findings = lint(SEED_LAUNCHES[name])
    assert rules(findings, "error") == set(), findings


TRAPS: list[tuple[str, dict[str, Any], str, str]] = [
    ("partition count", {"layer_partition": [12, 12, 19]}, "partition-count", "error"),
    ("partition sum", {"layer_partition": [12, 12, 12, 8]}, "partition-sum", "error"),
    ("dspark 7 tokens", {"speculative": {"method": "dspark", "num_speculative_tokens": 7}},
     "speculative-tokens", "error"),
    ("mtp", {"speculative": {"method": "mtp", "num_speculative_tokens": 1}},
     "speculative-method", "error"),
    ("enforce eager", {"extra_args": [*ALLOVER_PP4["extra_args"], "--enforce-eager"]},
     "enforce-eager", "error"),
    ("row chunk 0", {"env": {**ALLOVER_PP4["env"], "DSV4_LOGITS_ROW_CHUNK": "0"}},
     "row-chunk-unset", "error"),
    ("row chunk 128", {"env": {**ALLOVER_PP4["env"], "DSV4_LOGITS_ROW_CHUNK": "128"}},
     "row-chunk-high", "warning"),
    ("no reasoning parser", {"extra_args": [*ALLOVER_PP4["extra_args"][:-2]]},
     "reasoning-parser", "warning"),
    ("fork multiproc", {"env": {**ALLOVER_PP4["env"], "VLLM_WORKER_MULTIPROC_METHOD": "fork"}},
     "multiproc-method", "error"),
    ("small shm", {"shm_size": "8g", "ipc_host": False}, "shm-size", "error"),
    ("expandable segments",
     {"env": {**ALLOVER_PP4["env"], "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}},
     "expandable-segments", "error"),
    ("memory 0.97", {"gpu_memory_utilization": 0.97}, "gpu-memory-utilization", "error"),
    ("tail heavy", {"layer_partition": [11, 11, 10, 11]}, "partition-tail", "warning"),
]  # fmt: skip


@pytest.mark.parametrize("name", sorted(SEED_LAUNCHES))
@pytest.mark.parametrize(
    ("change", "rule", "severity"),
    [trap[1:] for trap in TRAPS],
    ids=[trap[0] for trap in TRAPS],
)
def test_every_trap_is_still_caught_on_every_seed_launch(
    name: str, change: dict[str, Any], rule: str, severity: str
) -> None:
    launch = dict(SEED_LAUNCHES[name])
    if "env" in change:  # the trap's variable on top of this launch's own environment
        change = {"env": {**launch["env"], **change["env"]}}
    if "layer_partition" in change and launch.get("layer_partition") is None:
        launch["env"] = {k: v for k, v in launch["env"].items() if k != "VLLM_PP_LAYER_PARTITION"}
    if rule == "partition-count" and launch["pipeline_parallel_size"] == 3:
        change = {"layer_partition": [12, 12, 12, 7]}
    if rule == "partition-sum" and launch["pipeline_parallel_size"] == 3:
        change = {"layer_partition": [15, 15, 14]}
    if rule == "partition-tail" and launch["pipeline_parallel_size"] == 3:
        change = {"layer_partition": [12, 12, 19]}
    findings = lint({**launch, **change})
    assert (rule, severity) in {(f.rule, f.severity) for f in findings}, findings


def test_a_three_card_partition_heavier_at_the_end_warns_and_the_recipes_do_not() -> None:
    preset = {"preset": "dsv4-flash-pp3-dspark"}
    assert lint(preset) == []
    (finding,) = lint({**preset, "layer_partition": [12, 12, 19]})
    assert (finding.rule, finding.severity, finding.value) == (
        "partition-tail",
        "warning",
        "[12, 12, 19]",
    )
    assert "lm_head" in finding.reason and "15,15,13" in finding.reason
    assert lint({"preset": "dsv4-flash-pp4-dspark"}) == []


def test_engram_in_host_memory_warns_with_the_seeds_reason() -> None:
    table = {"preset": "dsv41-flash-pp4-dspark", "env": {"DSV41_ENGRAM_STORAGE": "host"}}
    (finding,) = lint(table)
    assert (finding.rule, finding.severity, finding.key) == (
        "engram-storage", "warning", "env.DSV41_ENGRAM_STORAGE",
    )  # fmt: skip
    assert "15 of 20" in finding.reason and "'_'" in finding.reason
    assert lint({**table, "env": {"DSV41_ENGRAM_STORAGE": "ssd"}}) == []


SCRIPT = """#!/usr/bin/env bash
# run-pp-dspark.sh as the seeds describe it (trimmed)
set -euo pipefail
export VLLM_WORKER_MULTIPROC_METHOD=spawn
export DSV4_LOGITS_ROW_CHUNK="${DSV4_ROW_CHUNK:-64}"
export NCCL_IB_DISABLE=1 NCCL_SHM_DISABLE=1
if ! probe_cards; then
{reload}
fi
exec vllm serve "$DSV4_MODEL" --pipeline-parallel-size 4
"""


def script_recipe(tmp_path: Path, reload: str, row_chunk: str = "") -> Path:
    launch = tmp_path / "launch"
    launch.mkdir()
    text = SCRIPT.replace("{reload}", reload)
    if row_chunk:
        text = text.replace('"${DSV4_ROW_CHUNK:-64}"', row_chunk)
    (launch / "run-pp-dspark.sh").write_text(text)
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        'command = ["bash", "launch/run-pp-dspark.sh", "--maxlen"]\n'
        'model = "/models/DeepSeek-V4-Flash-0731"\n'
        "pipeline_parallel_size = 4\nlayer_partition = [12, 12, 12, 7]\n"
        'extra_args = ["--tool-call-parser", "deepseek_v4", "--reasoning-parser", "deepseek_v4"]\n'
    )
    return recipe


def test_a_launcher_scripts_exports_count_and_its_module_reload_is_an_error(
    tmp_path: Path,
) -> None:
    recipe = script_recipe(tmp_path, "  sudo rmmod nvidia_uvm && modprobe nvidia_uvm")
    findings = lint_path(recipe, host_checks=False)
    assert rules(findings, "error") == {"module-reload"}, findings
    (reload,) = [f for f in findings if f.rule == "module-reload"]
    assert reload.value == "launch/run-pp-dspark.sh:8: rmmod nvidia_uvm"
    assert "Xid 154" in reload.reason and "reboot" in reload.reason
    # The script's DSV4_* export is the fork's evidence: its rules judge the script's env.
    note = next(f for f in findings if f.rule == "family-inferred")
    assert "fork's own rules" not in note.reason


@pytest.mark.parametrize("reload", ["  modprobe -r nvidia_uvm", "  /sbin/modprobe --remove nvidia"])
def test_modprobe_r_is_a_module_reload_too(tmp_path: Path, reload: str) -> None:
    findings = lint_path(script_recipe(tmp_path, reload), host_checks=False)
    assert rules(findings, "error") == {"module-reload"}


def test_a_clean_launcher_lints_clean_and_its_bad_export_is_caught(tmp_path: Path) -> None:
    quiet = "  echo 'never rmmod nvidia_uvm: reboot the host' # rmmod nvidia"
    findings = lint_path(script_recipe(tmp_path, quiet), host_checks=False)
    assert rules(findings) == set(), findings
    broken = tmp_path / "broken"
    broken.mkdir()
    findings = lint_path(script_recipe(broken, "  true", row_chunk="0"), host_checks=False)
    assert rules(findings, "error") == {"row-chunk-unset"}


def test_an_unreadable_launcher_is_a_warning_never_read_as_a_device(tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('command = ["bash", "/dev/zero"]\nmodel = "m"\n')
    findings = lint_path(recipe, host_checks=False)
    assert [(f.rule, f.severity) for f in findings] == [("launcher-script", "warning")]
    assert "not a regular file" in findings[0].reason


def test_llama_server_gets_the_model_as_dash_m() -> None:
    recipe = recipe_from_table(
        {"command": ["/opt/llama.cpp/llama-server"], "model": "/models/glm.gguf", "family": "none"},
        "test",
    )
    argv = build_launch(recipe, python="python3").argv
    assert argv[:3] == ("/opt/llama.cpp/llama-server", "-m", "/models/glm.gguf")
    vllm = build_launch(recipe_from_table({"model": "/models/x"}, "test")).argv
    assert vllm[:3] == ("vllm", "serve", "/models/x")


def test_speculative_enabled_false_is_the_recipes_plain() -> None:
    plain = recipe_from_table(
        {"preset": "dsv4-flash-pp4-dspark", "speculative": {"enabled": False}}, "plain"
    )
    assert plain.speculation is None
    assert "--speculative-config" not in build_launch(plain).argv
    assert lint(plain.model_dump(mode="json", exclude_none=True)) == []
    # A speculative config switched off is the same launch as none (one hash).
    bare = preset_recipe("dsv4-flash-pp4-dspark").model_copy(update={"speculative": None})
    assert recipe_hash(plain) == recipe_hash(bare)
    # Recipes written before the switch keep their hash.
    explicit = recipe_from_table(
        {"preset": "dsv4-flash-pp4-dspark", "speculative": {"enabled": True}}, "on"
    )
    assert recipe_hash(explicit) == recipe_hash(preset_recipe("dsv4-flash-pp4-dspark"))
    # On, it needs its method and token count.
    findings = lint({"model": "m", "speculative": {"enabled": True, "method": "dspark"}})
    assert [(f.rule, f.key) for f in findings] == [("invalid-value", "speculative")]
    assert "enabled = false" in findings[0].reason


def test_recipe_lint_profile_names_the_profile_it_linted(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text(
        '[serving.profiles.upstream]\nmode = "docker"\nimage = "vllm/vllm-openai:v0.12.0"\n'
        'model = "/models/DeepSeek-V4-Flash-0731"\nshm_size = "8g"\n'
        '[serving]\nprofile = "upstream"\n'
    )
    done = run_fleetctl_here("recipe", "lint", "--profile", "upstream", "--config", str(config))
    assert done.returncode == 2, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert first == "profile upstream: 2 errors, 1 warning, 1 note", done.stdout
    assert exit_code([]) == 0
