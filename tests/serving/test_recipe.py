"""Recipe loading: presets, override merging, and one-line errors for bad files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from serving.recipe.presets import preset_names
from serving.recipe.recipe import (
    Recipe,
    RecipeError,
    Speculative,
    load_recipe,
    parse_recipe_table,
    preset_recipe,
    recipe_from_table,
    shm_size_bytes,
)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "recipe.toml"
    path.write_text(text)
    return path


def _error(tmp_path: Path, text: str) -> str:
    path = _write(tmp_path, text)
    with pytest.raises(RecipeError) as caught:
        load_recipe(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    return message.removeprefix(f"{path}: ")


def test_builtin_presets_ship() -> None:
    assert {"dsv4-flash-pp4-dspark", "dsv4-flash-pp3-dspark", "sim-engine"} <= set(preset_names())


@pytest.mark.parametrize(
    ("name", "mode", "pp", "partition"),
    [
        ("dsv4-flash-pp4-dspark", "docker", 4, (12, 12, 12, 7)),
        ("dsv4-flash-pp3-dspark", "docker", 3, (15, 15, 13)),
        ("sim-engine", "process", 4, (12, 12, 12, 7)),
    ],
)
def test_presets_load(name: str, mode: str, pp: int, partition: tuple[int, ...]) -> None:
    recipe = preset_recipe(name)
    assert recipe.mode == mode
    assert recipe.pipeline_parallel_size == pp
    assert recipe.layer_partition == partition
    assert recipe.speculative == Speculative(method="dspark", num_speculative_tokens=5)
    assert recipe.served_model_name == "dsv4s"


def test_sim_engine_preset_runs_the_simulator_on_a_port_chosen_at_launch() -> None:
    recipe = preset_recipe("sim-engine")
    assert recipe.command == ("{python}", "-m", "serving.sim.engine", "serve")
    assert recipe.model == "dsv4-sim"
    assert recipe.port == 0
    assert recipe.host == "127.0.0.1"


def test_file_overrides_preset_and_tables_merge_key_wise(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
preset = "dsv4-flash-pp4-dspark"
model = "/srv/models/dsv4"
port = 9000
extra_args = ["--max-num-seqs", "4"]

[env]
DSV4_LOGITS_ROW_CHUNK = "32"
NCCL_IB_DISABLE = "1"

[speculative]
num_speculative_tokens = 4
""",
    )
    recipe = load_recipe(path)
    assert recipe.model == "/srv/models/dsv4"
    assert recipe.port == 9000
    preset_flags = preset_recipe("dsv4-flash-pp4-dspark").extra_args
    seqs = preset_flags.index("--max-num-seqs")
    # extra_args adds to the preset's flags; a flag given again changes only its own value
    assert recipe.extra_args == (*preset_flags[: seqs + 1], "4", *preset_flags[seqs + 2 :])
    assert [override.to_dict() for override in recipe.preset_overrides] == [
        {
            "flag": "--max-num-seqs",
            "preset": ["--max-num-seqs", "8"],
            "recipe": ["--max-num-seqs", "4"],
            "dropped": False,
        }
    ]
    assert recipe.env == {
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        "DSV4_LOGITS_ROW_CHUNK": "32",
        "HF_HUB_OFFLINE": "1",
        "NCCL_IB_DISABLE": "1",
    }
    assert recipe.speculative == Speculative(method="dspark", num_speculative_tokens=4)
    assert recipe.image == "dsv4-a100:devel"  # untouched keys come from the preset
    assert recipe.layer_partition == (12, 12, 12, 7)


def test_recipe_without_preset_gets_defaults() -> None:
    recipe = recipe_from_table({"model": "/m"}, "t")
    assert recipe.mode == "process"
    assert recipe.command == ("vllm", "serve")
    assert recipe.host == "127.0.0.1"
    assert recipe.container_name == "cmpfleet-engine"
    assert recipe.gpus == "all"
    assert recipe.container_port == 8000
    assert recipe.engine_name == "/m"


def test_layer_partition_becomes_the_env_variable_and_wins() -> None:
    recipe = recipe_from_table(
        {"model": "m", "layer_partition": [15, 15, 13], "env": {"VLLM_PP_LAYER_PARTITION": "1"}},
        "t",
    )
    assert recipe.effective_env()["VLLM_PP_LAYER_PARTITION"] == "15,15,13"
    assert recipe.env["VLLM_PP_LAYER_PARTITION"] == "1"


def test_speculative_config_is_compact_json_in_seed_order() -> None:
    spec = Speculative(method="dspark", num_speculative_tokens=5)
    assert spec.config_json() == '{"method":"dspark","num_speculative_tokens":5}'


def test_recipe_is_frozen() -> None:
    recipe = preset_recipe("sim-engine")
    with pytest.raises(ValidationError):
        recipe.port = 1


def test_unknown_key_is_one_line(tmp_path: Path) -> None:
    message = _error(tmp_path, 'preset = "sim-engine"\nspec_tokens = 5\n')
    assert message == "unknown key 'spec_tokens'"


def test_unknown_key_suggests_the_close_one(tmp_path: Path) -> None:
    message = _error(tmp_path, 'preset = "sim-engine"\nserved_model = "x"\n')
    assert message == "unknown key 'served_model' (did you mean 'served_model_name'?)"


def test_unknown_key_inside_a_table(tmp_path: Path) -> None:
    message = _error(tmp_path, 'preset = "sim-engine"\n[speculative]\nnum_tokens = 5\n')
    assert message.startswith("unknown key 'speculative.num_tokens'")


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('port = "8098"', "key 'port': should be an integer (got \"8098\")"),
        ("port = true", "key 'port': should be an integer (got true)"),
        ("port = 70000", "key 'port': Input should be less than or equal to 65535 (got 70000)"),
        (
            'layer_partition = [12, 12, "12", 7]',
            "key 'layer_partition[2]': should be an integer (got \"12\")",
        ),
        ("layer_partition = [12, 0]", "key 'layer_partition[1]': Input should be greater than"),
        ('extra_args = "--enforce-eager"', "key 'extra_args': should be an array"),
        ("speculative = 5", "key 'speculative': should be a table (got 5)"),
        (
            "[env]\nDSV4_LOGITS_ROW_CHUNK = 64",
            "key 'env.DSV4_LOGITS_ROW_CHUNK': should be a string",
        ),
        ('[env]\n"BAD NAME" = "1"', "key 'env': not a valid environment variable name"),
        ('mode = "kubernetes"', "key 'mode': Input should be 'process', 'docker' or 'podman'"),
        ("gpu_memory_utilization = 1.5", "key 'gpu_memory_utilization': Input should be less"),
        ('gpu_memory_utilization = "0.9"', "key 'gpu_memory_utilization': should be a number"),
        ('shm_size = "lots"', "key 'shm_size': not a size like '16g' or '512m' (got \"lots\")"),
        ('mounts = ["/models"]', "key 'mounts': a mount is 'SOURCE:/TARGET[:OPTIONS]'"),
        ('container_name = "no spaces"', "key 'container_name': not a valid container name"),
        ('gpus = "0;1"', "key 'gpus': 'all' or a comma-separated list"),
        ('ipc_host = "yes"', "key 'ipc_host': should be true or false"),
        ('preset = "nope"', "key 'preset': no such preset (known: "),
        ("preset = 3", "key 'preset': should be a string (got 3)"),
    ],
)
def test_wrong_values_are_one_line(tmp_path: Path, toml: str, expected: str) -> None:
    base = "" if toml.startswith("preset") else 'preset = "sim-engine"\n'
    assert _error(tmp_path, base + toml).startswith(expected)


def test_missing_model(tmp_path: Path) -> None:
    assert _error(tmp_path, 'mode = "process"\n') == "missing key 'model': this key is required"


def test_container_mode_needs_an_image(tmp_path: Path) -> None:
    message = _error(tmp_path, 'mode = "podman"\nmodel = "/m"\n')
    assert message == "missing key 'image': mode 'podman' needs an image"


def test_process_mode_needs_a_command(tmp_path: Path) -> None:
    message = _error(tmp_path, 'model = "/m"\ncommand = []\n')
    assert message == "key 'command': process mode needs a command (got [])"


def test_several_problems_are_counted(tmp_path: Path) -> None:
    message = _error(tmp_path, 'model = "/m"\nfoo = 1\nbar = 2\n')
    assert message == "unknown key 'foo' (and 1 more problem)"


def test_toml_syntax_error_names_the_line(tmp_path: Path) -> None:
    message = _error(tmp_path, 'model = "/m"\nport = 8098\nmode = docker\n')
    assert message.startswith("TOML syntax error: ")
    assert "line 3" in message


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    with pytest.raises(RecipeError, match=r"absent.toml: cannot read: No such file"):
        load_recipe(path)


def test_embedded_table_names_its_source() -> None:
    with pytest.raises(RecipeError) as caught:
        recipe_from_table({"model": "m", "prot": 1}, "fleet.toml [serving.recipe]")
    assert str(caught.value) == (
        "fleet.toml [serving.recipe]: unknown key 'prot' (did you mean 'port'?)"
    )


def test_parse_reports_unknown_keys_and_still_returns_the_recipe() -> None:
    recipe, findings = parse_recipe_table({"preset": "sim-engine", "foo": [1], "env": {"A": "1"}})
    assert recipe is not None
    assert recipe.env["A"] == "1"
    assert [(f.rule, f.severity, f.key, f.value) for f in findings] == [
        ("unknown-key", "error", "foo", "[1]")
    ]


def test_parse_returns_no_recipe_for_a_wrong_type() -> None:
    table: dict[str, Any] = {"preset": "sim-engine", "port": "x", "zzz": 1}
    recipe, findings = parse_recipe_table(table)
    assert recipe is None
    assert {(f.rule, f.key) for f in findings} == {
        ("unknown-key", "zzz"),
        ("invalid-value", "port"),
    }


def test_recipe_from_a_full_dump_round_trips() -> None:
    recipe = preset_recipe("dsv4-flash-pp4-dspark")
    again = recipe_from_table(recipe.model_dump(mode="json"), "dump")
    assert again == recipe
    assert again.canonical_json() == recipe.canonical_json()
    assert isinstance(again, Recipe)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("16g", 16 << 30),
        ("16G", 16 << 30),
        ("16gb", 16 << 30),
        ("16GiB", 16 << 30),
        ("512m", 512 << 20),
        ("1.5g", 3 << 29),
        ("1024", 1024),
    ],
)
def test_shm_size_grammar(text: str, size: int) -> None:
    assert shm_size_bytes(text) == size


@pytest.mark.parametrize("text", ["", "g", "16x", "-1g", "sixteen"])
def test_shm_size_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        shm_size_bytes(text)
