"""Rules that know what they judge: generic vLLM rules for every recipe, the DeepSeek V4
Flash fork's only for its family; the layer count from the checkpoint; waivers; whether
the weights fit the cards. Model directories are real directories with a real
config.json and (sparse) weight files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from serving.recipe.findings import Finding, exit_code
from serving.recipe.lint import RigCards, lint_recipe, waivable_rule_ids
from serving.recipe.recipe import preset_recipe

# A GLM INT4 launch as its owner runs it on 8 cards: mtp, expandable_segments, 0.97.
GLM: dict[str, Any] = {
    "mode": "docker",
    "image": "vllm-glm53:int4",
    "model": "/models/GLM-5.3-INT4",
    "shm_size": "32g",
    "pipeline_parallel_size": 8,
    "layer_partition": [10, 10, 10, 10, 10, 10, 10, 8],
    "num_layers": 78,
    "gpu_memory_utilization": 0.97,
    "extra_args": ["--enable-auto-tool-choice", "--tool-call-parser", "glm45"],
    "speculative": {"method": "mtp", "num_speculative_tokens": 1},
    "env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
}


def lint(table: dict[str, Any], **kwargs: Any) -> list[Finding]:
    return lint_recipe(table, host_checks=False, **kwargs)


def facts(findings: list[Finding]) -> list[tuple[str, str, str]]:
    return [(f.rule, f.severity, f.key) for f in findings]


def test_a_recipe_without_family_gets_the_generic_rules_only() -> None:
    assert lint(GLM) == []


def test_the_same_launch_as_the_dsv4_fork_breaks_every_fork_rule() -> None:
    findings = lint({**GLM, "family": "dsv4-flash"})
    assert {f.rule for f in findings if f.severity == "error"} == {
        "speculative-method",
        "row-chunk-unset",
        "multiproc-method",
        "expandable-segments",
        "gpu-memory-utilization",
    }
    assert exit_code(findings) == 2
    # num_layers says 78; without it the family's build (43 layers) is the count.
    table = {k: v for k, v in GLM.items() if k != "num_layers"}
    assert "partition-sum" in {f.rule for f in lint({**table, "family": "dsv4-flash"})}


def test_an_unknown_family_names_the_known_ones() -> None:
    (finding,) = lint({**GLM, "family": "glm"})
    assert (finding.rule, finding.key) == ("invalid-value", "family")
    assert "dsv4-flash" in finding.reason and "dsv41-flash" in finding.reason


def test_v41_build_wants_its_own_parsers() -> None:
    recipe = preset_recipe("dsv41-flash-pp4-dspark").model_dump(mode="json", exclude_none=True)
    recipe["extra_args"] = [
        "deepseek_v4" if token == "deepseek_v41" else token for token in recipe["extra_args"]
    ]
    assert facts(lint(recipe)) == [
        ("v41-parser", "warning", "--tool-call-parser"),
        ("v41-parser", "warning", "--reasoning-parser"),
    ]


def model_dir(root: Path, config: dict[str, Any] | None, weights_gib: list[float] = ()) -> Path:
    """A model directory with a config.json and sparse weight files of the given sizes."""
    root.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (root / "config.json").write_text(json.dumps(config))
    for index, size in enumerate(weights_gib):
        with (root / f"model-{index:05d}.safetensors").open("wb") as shard:
            shard.truncate(int(size * (1 << 30)))
    (root / "tokenizer.json").write_text("{}")  # not a weight file
    return root


@pytest.mark.parametrize(
    ("config", "source"),
    [
        ({"num_hidden_layers": 78}, "config.json num_hidden_layers"),
        ({"num_layers": 78}, "config.json num_layers"),  # GLM/ChatGLM configs
        ({"text_config": {"num_hidden_layers": 78}}, "config.json text_config.num_hidden_layers"),
    ],
)
def test_the_layer_count_comes_from_config_json(
    tmp_path: Path, config: dict[str, Any], source: str
) -> None:
    path = model_dir(tmp_path / "glm", config)
    table = {**GLM, "mode": "process", "image": None, "shm_size": None, "model": str(path)}
    table = {k: v for k, v in table.items() if v is not None}
    table.pop("num_layers")
    assert lint(table) == []
    table["layer_partition"] = [10, 10, 10, 10, 10, 10, 10, 7]
    (finding,) = lint(table)
    assert (finding.rule, finding.severity) == ("partition-sum", "error")
    assert "sums to 77 layers; the model has 78" in finding.reason and source in finding.reason


def test_a_container_model_is_read_through_its_mount(tmp_path: Path) -> None:
    model_dir(tmp_path / "models" / "GLM-5.3-INT4", {"num_hidden_layers": 77})
    table = {**GLM, "mounts": [f"{tmp_path / 'models'}:/models:ro"]}
    assert facts(lint(table)) == [
        ("partition-sum", "error", "layer_partition"),
        ("num-layers-mismatch", "warning", "num_layers"),
    ]


def test_an_unknown_layer_count_is_a_note_not_an_error() -> None:
    table = {k: v for k, v in GLM.items() if k != "num_layers"}
    findings = lint(table)
    assert facts(findings) == [("layers-unknown", "note", "layer_partition")]
    assert exit_code(findings) == 0
    assert findings[0].line().startswith("note [layers-unknown] layer_partition = [10, 10")


# --- waivers -------------------------------------------------------------------------


def test_a_waived_rule_becomes_a_note_showing_the_reason() -> None:
    why = "measured on the 78-layer model: 0.97 is stable"
    table = {
        **preset_recipe("dsv4-flash-pp4-dspark").model_dump(mode="json", exclude_none=True),
        "gpu_memory_utilization": 0.97,
    }
    assert facts(lint(table)) == [("gpu-memory-utilization", "error", "gpu_memory_utilization")]
    table["lint"] = {"waive": {"gpu-memory-utilization": why}}
    (note,) = lint(table)
    assert (note.rule, note.severity, note.waived) == ("gpu-memory-utilization", "note", why)
    assert note.line() == (
        "note [gpu-memory-utilization] gpu_memory_utilization = 0.97: "
        f"waived: {why} (above about 0.965 has crashed 3-card rigs; 0.85 is proven)"
    )
    assert note.to_dict()["waived"] == why
    assert exit_code([note]) == 0


def test_a_waiver_of_an_unknown_rule_is_an_error() -> None:
    findings = lint({**GLM, "lint": {"waive": {"gpu-memory": "typo"}}})
    (finding,) = findings
    assert (finding.rule, finding.severity, finding.key) == (
        "unknown-waiver",
        "error",
        "lint.waive.gpu-memory",
    )
    assert "gpu-memory-utilization" in finding.reason  # the known ids are listed


def test_a_waiver_needs_a_reason() -> None:
    (finding,) = lint({**GLM, "lint": {"waive": {"shm-size": ""}}})
    assert (finding.rule, finding.key) == ("invalid-value", "lint.waive.shm-size")


def test_every_rule_that_fires_can_be_waived() -> None:
    """The ids a waiver accepts cover the findings rules produce (a table of them)."""
    produced = {
        "partition-count",
        "partition-sum",
        "partition-conflict",
        "partition-missing",
        "layers-unknown",
        "speculative-tokens",
        "speculative-method",
        "enforce-eager",
        "row-chunk-unset",
        "row-chunk-high",
        "reasoning-parser",
        "tool-call-parser",
        "multiproc-method",
        "expandable-segments",
        "gpu-memory-utilization",
        "gpu-memory-high",
        "shm-size",
        "duplicate-flag",
        "ignored-key",
        "unknown-flag",
        "parallel-cards",
        "fits-cards",
        "num-layers-mismatch",
        "v41-parser",
        "preset-flag-dropped",
        "port-in-use",
        "port-check",
        "command-not-found",
        "mount-source",
        "model-path",
    }
    assert produced <= waivable_rule_ids()
    assert not {"unknown-key", "invalid-value", "unknown-waiver"} & waivable_rule_ids()


# --- generic rules ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "cards", "expected"),
    [
        # TP4 x PP2 needs 8 cards; gpus names 6.
        (
            {
                "pipeline_parallel_size": 2,
                "layer_partition": [39, 39],
                "gpus": "0,1,2,3,4,5",
                "extra_args": ["--tensor-parallel-size", "4"],
            },
            RigCards(),
            [("parallel-cards", "error", "--tensor-parallel-size")],
        ),
        # TP2 x PP3 on cards 0-5: exactly right.
        (
            {
                "pipeline_parallel_size": 3,
                "layer_partition": [26, 26, 26],
                "gpus": "0,1,2,3,4,5",
                "extra_args": ["--tensor-parallel-size", "2"],
            },
            RigCards(),
            [],
        ),
        # PP8 on "all" cards of a 6-card rig.
        ({}, RigCards(count=6), [("parallel-cards", "error", "pipeline_parallel_size")]),
        ({}, RigCards(count=8), []),
        # Eight cards named, six used.
        (
            {"pipeline_parallel_size": 6, "layer_partition": [13] * 6, "gpus": "0,1,2,3,4,5,6,7"},
            RigCards(),
            [("parallel-cards", "warning", "pipeline_parallel_size")],
        ),
    ],
)
def test_parallel_sizes_against_the_cards(
    overrides: dict[str, Any], cards: RigCards, expected: list[tuple[str, str, str]]
) -> None:
    assert facts(lint({**GLM, **overrides}, cards=cards)) == expected


def test_a_near_miss_of_a_vllm_flag_is_named_a_forks_own_flag_is_not() -> None:
    table = {
        **GLM,
        "extra_args": [*GLM["extra_args"], "--max-num-seq", "4", "--engram-config", "x"],
    }
    (finding,) = lint(table)
    assert (finding.rule, finding.severity, finding.key) == (
        "unknown-flag",
        "warning",
        "--max-num-seq",
    )
    assert "did you mean '--max-num-seqs'" in finding.reason


@pytest.mark.parametrize(("fraction", "rule"), [(0.99, "gpu-memory-high"), (0.97, None)])
def test_the_generic_memory_bound(fraction: float, rule: str | None) -> None:
    findings = lint({**GLM, "gpu_memory_utilization": fraction})
    assert [f.rule for f in findings] == ([rule] if rule else [])


# --- fits-the-cards ------------------------------------------------------------------------


def glm_in(path: Path, **overrides: Any) -> dict[str, Any]:
    table = {**GLM, "mounts": [f"{path.parent}:/models:ro"], "model": f"/models/{path.name}"}
    return {**table, **overrides}


def test_a_checkpoint_that_cannot_fit_never_starts(tmp_path: Path) -> None:
    """The issue's case: a 455 GB GLM INT4 checkpoint on 4 x 64 GiB cards."""
    shards = [455e9 / 5 / (1 << 30)] * 5
    path = model_dir(tmp_path / "models" / "GLM-5.3-INT4", {"num_hidden_layers": 78}, shards)
    table = glm_in(path, pipeline_parallel_size=4, layer_partition=[20, 20, 20, 18])
    (finding,) = lint(table, cards=RigCards(count=4))
    assert (finding.rule, finding.severity, finding.key) == ("fits-cards", "error", "model")
    assert finding.value == "423.8 GiB in 5 weight files"
    assert "cannot fit on 4 cards x 64 GiB at 0.97" in finding.reason
    # On 8 cards it fits.
    assert lint(glm_in(path), cards=RigCards(count=8)) == []


def test_a_tight_fit_is_a_warning_and_the_cards_own_memory_counts(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "models" / "m", {"num_hidden_layers": 78}, [6.5, 6.5])
    table = glm_in(path, gpu_memory_utilization=0.9)
    # 8 cards of 2 GiB: 14.4 GiB for vLLM; 13 GiB of weights is 90%+ of it.
    (finding,) = lint(table, cards=RigCards(count=8, expected_mib=2048))
    assert (finding.rule, finding.severity) == ("fits-cards", "warning")
    assert "tight fit on 8 cards x 2 GiB at 0.9: 1.4 GiB left" in finding.reason
    # The rig's cards as read: two of them report less (locked at 1 GiB) -> it cannot fit.
    memory = dict.fromkeys(range(8), 2048) | {6: 1024, 7: 1024}
    (finding,) = lint(table, cards=RigCards(count=8, memory_mib=memory))
    assert (finding.rule, finding.severity) == ("fits-cards", "error")


def test_gpus_names_the_cards_that_load_the_weights(tmp_path: Path) -> None:
    path = model_dir(tmp_path / "models" / "m", {"num_hidden_layers": 45}, [5.0])
    table = glm_in(
        path,
        num_layers=45,
        gpus="0,1,2",
        pipeline_parallel_size=3,
        layer_partition=[15, 15, 15],
        gpu_memory_utilization=0.9,
    )
    small = {0: 1024, 1: 1024, 2: 1024, 3: 65536}
    (finding,) = lint(table, cards=RigCards(count=4, memory_mib=small))
    assert (finding.rule, finding.severity) == ("fits-cards", "error")  # card 3 does not help
