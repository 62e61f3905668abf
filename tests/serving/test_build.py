"""Launch building: golden argv per preset and launcher mode, the seeds' flags, show/diff.

The goldens in ``tests/serving/golden/*.json`` are the exact ``recipe show --json``
documents. The test compares and never writes them; after an intended change, regenerate
with ``.venv/bin/python -m tests.serving.test_build --regenerate`` and review the diff.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from serving.recipe.build import build_launch, diff_specs, show_text, spec_to_dict
from serving.recipe.recipe import Recipe, RecipeError, preset_recipe, recipe_from_table
from serving.recipe.spec import LaunchMode, LaunchSpec

GOLDEN_DIR = Path(__file__).parent / "golden"
GOLDEN_PYTHON = "/opt/cmpfleet/venv/bin/python"
SIM_PORT = 18098

# docs/domain.md "The reference launch": the reference launch on four cards, verbatim.
REFERENCE_LAUNCH = (
    "vllm serve MODEL --pipeline-parallel-size 4 --kv-cache-dtype fp8"
    " --block-size 256 --max-num-batched-tokens 2048 --gpu-memory-utilization 0.85 --max-num-seqs 8"
    " --trust-remote-code --no-enable-flashinfer-autotune --tokenizer-mode deepseek_v4"
    " --enable-auto-tool-choice --tool-call-parser deepseek_v4 --reasoning-parser deepseek_v4"
    " --served-model-name dsv4s --speculative-config"
    ' \'{"method":"dspark","num_speculative_tokens":5}\''
)
REFERENCE_FLAGS = shlex.split(REFERENCE_LAUNCH)[3:]
REFERENCE_ENV = {
    "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
    "DSV4_LOGITS_ROW_CHUNK": "64",
    "VLLM_PP_LAYER_PARTITION": "12,12,12,7",
}
# What the seeds' launchers add to it (run-pp-dspark.sh): the context they pass by default
# (DSV4_MAXLEN=32768) and an offline hub, the weights being on local disk.
_MEMORY = REFERENCE_FLAGS.index("--gpu-memory-utilization") + 2
LAUNCHER_FLAGS = [
    *REFERENCE_FLAGS[:_MEMORY],
    "--max-model-len",
    "32768",
    *REFERENCE_FLAGS[_MEMORY:],
]
LAUNCHER_ENV = {**REFERENCE_ENV, "HF_HUB_OFFLINE": "1"}

PRESETS = (
    "dsv4-flash-pp4-dspark",
    "dsv4-flash-pp3-dspark",
    "dsv41-flash-pp4-dspark",
    "sim-engine",
)
MODES = ("process", "docker", "podman")


def _case_table(preset: str, mode: str) -> dict[str, Any]:
    """A preset run under a launcher mode; the simulated engine needs an image in containers."""
    table: dict[str, Any] = {"preset": preset, "mode": mode}
    if preset == "sim-engine" and mode != "process":
        table["image"] = "cmpfleet-sim:latest"
    return table


def _case_spec(preset: str, mode: str) -> LaunchSpec:
    recipe = recipe_from_table(_case_table(preset, mode), f"{preset}/{mode}")
    port = SIM_PORT if preset == "sim-engine" else None
    return build_launch(recipe, python=GOLDEN_PYTHON, port=port)


def _golden_path(preset: str, mode: str) -> Path:
    return GOLDEN_DIR / f"{preset}.{mode}.json"


def _render(spec: LaunchSpec) -> str:
    return json.dumps(spec_to_dict(spec), indent=2, sort_keys=True) + "\n"


def regenerate() -> None:
    """Rewrite every golden file from the current code (run by hand, never by pytest)."""
    GOLDEN_DIR.mkdir(exist_ok=True)
    for preset in PRESETS:
        for mode in MODES:
            _golden_path(preset, mode).write_text(_render(_case_spec(preset, mode)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("preset", PRESETS)
def test_golden_launch(preset: str, mode: str) -> None:
    golden = _golden_path(preset, mode)
    assert golden.is_file(), f"missing golden {golden.name}: run the regenerate command"
    assert json.loads(_render(_case_spec(preset, mode))) == json.loads(golden.read_text())


def _engine_part(spec: LaunchSpec, image: str) -> list[str]:
    argv = list(spec.argv)
    return argv[argv.index(image) + 1 :]


def test_pp4_preset_is_the_reference_launch() -> None:
    recipe = preset_recipe("dsv4-flash-pp4-dspark")
    spec = build_launch(recipe)
    assert recipe.image == "dsv4-a100:devel"
    model = recipe.model
    assert _engine_part(spec, "dsv4-a100:devel") == [
        "vllm",
        "serve",
        model,
        *LAUNCHER_FLAGS,
        "--port",
        "8000",
    ]
    assert spec.env == LAUNCHER_ENV
    assert "--shm-size=16g" in spec.argv
    assert spec.port == 8098
    assert spec.argv[spec.argv.index("-p") + 1] == "127.0.0.1:8098:8000"
    assert spec.served_model_name == "dsv4s"
    assert spec.models_url == "http://127.0.0.1:8098/v1/models"


def test_pp3_preset_differs_only_in_size_and_partition() -> None:
    spec = build_launch(preset_recipe("dsv4-flash-pp3-dspark"))
    expected = list(LAUNCHER_FLAGS)
    expected[expected.index("--pipeline-parallel-size") + 1] = "3"
    assert _engine_part(spec, "dsv4-a100:devel")[3:] == [*expected, "--port", "8000"]
    assert spec.env == {**LAUNCHER_ENV, "VLLM_PP_LAYER_PARTITION": "15,15,13"}


def test_v41_preset_is_the_reference_launch_with_v41_parsers_and_40_layers() -> None:
    recipe = preset_recipe("dsv41-flash-pp4-dspark")
    spec = build_launch(recipe)
    expected = list(LAUNCHER_FLAGS)
    for flag, value in (
        ("--tool-call-parser", "deepseek_v41"),
        ("--reasoning-parser", "deepseek_v41"),
        ("--served-model-name", "dsv41"),
    ):
        expected[expected.index(flag) + 1] = value
    assert _engine_part(spec, recipe.image or "")[3:] == [*expected, "--port", "8000"]
    assert {"--tool-call-parser", "deepseek_v41"} <= set(spec.argv)
    env = {k: v for k, v in LAUNCHER_ENV.items() if k != "DSV4_LOGITS_ROW_CHUNK"}
    assert spec.env == {**env, "VLLM_PP_LAYER_PARTITION": "11,11,11,7"}
    assert sum(recipe.layer_partition or ()) == 40
    assert recipe.expected_reasoning_field == "reasoning"


def test_sim_engine_preset_runs_the_simulator_with_reference_flags() -> None:
    spec = build_launch(preset_recipe("sim-engine"), python="/x/python", port=4242)
    assert spec.mode is LaunchMode.PROCESS
    assert list(spec.argv) == [
        "/x/python",
        "-m",
        "serving.sim.engine",
        "serve",
        "dsv4-sim",
        *REFERENCE_FLAGS,
        "--host",
        "127.0.0.1",
        "--port",
        "4242",
    ]
    assert spec.env == REFERENCE_ENV
    assert spec.container_name is None
    assert spec.port == 4242
    assert spec.health_url == "http://127.0.0.1:4242/health"


def test_sim_engine_port_zero_is_kept_until_resolved() -> None:
    spec = build_launch(preset_recipe("sim-engine"), python="/x/python")
    assert spec.port == 0
    assert spec.argv[-2:] == ("--port", "0")


def test_process_argv_runs_verbatim_in_a_real_child() -> None:
    """No shell between recipe and engine: the JSON flag and the env arrive intact."""
    echo = "import json, os, sys; print(json.dumps([sys.argv[1:], os.environ['VLLM_PP_LAYER_PARTITION']]))"
    recipe = recipe_from_table(
        {"preset": "sim-engine", "command": ["{python}", "-c", echo]}, "echo"
    )
    spec = build_launch(recipe, port=5555)
    assert spec.argv[0] == sys.executable
    done = subprocess.run(
        list(spec.argv),
        env={**os.environ, **spec.env},
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    received, partition = json.loads(done.stdout)
    assert received == list(spec.argv[3:])
    assert '{"method":"dspark","num_speculative_tokens":5}' in received
    assert partition == "12,12,12,7"


def _container(mode: str, **overrides: Any) -> LaunchSpec:
    table: dict[str, Any] = {"preset": "dsv4-flash-pp4-dspark", "mode": mode, **overrides}
    return build_launch(recipe_from_table(table, "t"))


def _values_after(spec: LaunchSpec, option: str) -> list[str]:
    """Every value given to ``option`` in ``spec.argv``, in order."""
    return [spec.argv[i + 1] for i, word in enumerate(spec.argv) if word == option]


def test_docker_runs_detached_named_and_keeps_the_exit_code() -> None:
    spec = _container("docker")
    assert spec.argv[:5] == ("docker", "run", "-d", "--name", "cmpfleet-engine")
    assert "--rm" not in spec.argv
    assert spec.container_name == "cmpfleet-engine"
    assert spec.labels == {"cmpfleet.recipe-hash": spec.recipe_hash}
    assert f"cmpfleet.recipe-hash={spec.recipe_hash}" in spec.argv
    assert spec.argv[spec.argv.index("--gpus") + 1] == "all"


def test_environment_is_passed_sorted_with_e() -> None:
    spec = _container("docker", env={"AAA": "1", "ZZZ": "2"})
    pairs = _values_after(spec, "-e")
    assert pairs == sorted(pairs)
    assert "AAA=1" in pairs
    assert "ZZZ=2" in pairs
    assert "DSV4_LOGITS_ROW_CHUNK=64" in pairs


def test_docker_device_list_is_csv_quoted() -> None:
    spec = _container("docker", gpus="0,2")
    assert spec.argv[spec.argv.index("--gpus") + 1] == '"device=0,2"'


def test_podman_uses_cdi_devices() -> None:
    spec = _container("podman", gpus="0,2")
    assert spec.argv[0] == "podman"
    assert "--gpus" not in spec.argv
    devices = _values_after(spec, "--device")
    assert devices == ["nvidia.com/gpu=0", "nvidia.com/gpu=2"]
    assert _container("podman").argv.count("nvidia.com/gpu=all") == 1


def test_ipc_host_mounts_and_ipv6_publish() -> None:
    spec = _container(
        "docker", ipc_host=True, host="::1", mounts=["/a:/b", "/c:/d:ro"], container_port=9000
    )
    assert "--ipc=host" in spec.argv
    assert spec.argv[spec.argv.index("-p") + 1] == "[::1]:8098:9000"
    mounts = _values_after(spec, "-v")
    assert mounts == ["/a:/b", "/c:/d:ro"]
    assert spec.argv[-2:] == ("--port", "9000")


def test_empty_command_for_an_entrypoint_image() -> None:
    spec = _container("docker", command=[])
    image_at = spec.argv.index("dsv4-a100:devel")
    assert spec.argv[image_at + 1] == "/models/DeepSeek-V4-Flash-0731"


def test_typed_flags_slot_among_unknown_extra_flags_in_reference_order() -> None:
    recipe = recipe_from_table(
        {
            "model": "m",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32768,
            "extra_args": ["--foo", "x", "--max-num-seqs=8", "--block-size", "256"],
        },
        "t",
    )
    argv = list(build_launch(recipe, port=1).argv)
    assert argv == [
        "vllm",
        "serve",
        "m",
        "--foo",
        "x",
        "--gpu-memory-utilization",
        "0.9",
        "--max-model-len",
        "32768",
        "--max-num-seqs=8",
        "--block-size",
        "256",
        "--host",
        "127.0.0.1",
        "--port",
        "1",
    ]


def test_typed_flags_win_over_repeats_in_extra_args() -> None:
    recipe = recipe_from_table(
        {
            "model": "m",
            "served_model_name": "a",
            "extra_args": ["--port", "1", "--served-model-name", "b"],
        },
        "t",
    )
    argv = list(build_launch(recipe, port=2).argv)
    assert argv[-4:] == ["--served-model-name", "a", "--port", "2"]
    names = [argv[i + 1] for i, word in enumerate(argv) if word == "--served-model-name"]
    assert names == ["b", "a"]  # argparse keeps the last: the typed one


def test_served_name_from_extra_args_when_not_typed() -> None:
    recipe = recipe_from_table(
        {"model": "/m", "extra_args": ["--served-model-name", "x", "y"]}, "t"
    )
    assert build_launch(recipe).served_model_name == "x"
    assert build_launch(recipe_from_table({"model": "/m"}, "t")).served_model_name == "/m"


def test_port_override_and_bad_port() -> None:
    recipe = preset_recipe("dsv4-flash-pp4-dspark")
    spec = build_launch(recipe, port=9001)
    assert _values_after(spec, "-p") == ["127.0.0.1:9001:8000"]
    assert spec.port == 9001
    with pytest.raises(RecipeError, match="70000"):
        build_launch(recipe, port=70000)


def test_recipe_hash_follows_the_effective_recipe() -> None:
    via_preset = preset_recipe("dsv4-flash-pp4-dspark")
    spelled_out = Recipe.model_validate(via_preset.model_dump())
    assert build_launch(via_preset).recipe_hash == build_launch(spelled_out).recipe_hash
    changed = recipe_from_table({"preset": "dsv4-flash-pp4-dspark", "port": 8099}, "t")
    assert build_launch(changed).recipe_hash != build_launch(via_preset).recipe_hash
    assert len(build_launch(changed).recipe_hash) == 64


def _unshow(text: str) -> list[str]:
    """The argv back out of ``show_text``: the lines after 'argv:' up to the environment."""
    lines = text.splitlines()
    start = lines.index("argv:") + 1
    end = next(i for i, line in enumerate(lines) if line.startswith("environment"))
    joined = " ".join(line.strip().removesuffix("\\") for line in lines[start:end])
    return shlex.split(joined)


@pytest.mark.parametrize("preset", PRESETS)
def test_show_text_is_the_exact_argv_ready_to_paste(preset: str) -> None:
    spec = build_launch(preset_recipe(preset), python="/x/python", port=7)
    text = show_text(spec)
    assert _unshow(text) == list(spec.argv)
    for name, value in spec.env.items():
        assert f"  {name}={shlex.quote(value)}" in text.splitlines()
    assert spec.recipe_hash in text


def test_diff_of_equal_specs_is_empty() -> None:
    spec = build_launch(preset_recipe("dsv4-flash-pp4-dspark"))
    assert diff_specs(spec, spec) == []


def test_diff_names_changed_flags_and_env() -> None:
    old = build_launch(preset_recipe("dsv4-flash-pp4-dspark"))
    new = build_launch(preset_recipe("dsv4-flash-pp3-dspark"))
    lines = diff_specs(old, new, old_label="last good", new_label="recipe")
    assert lines[:2] == ["--- last good", "+++ recipe"]
    assert "-argv --pipeline-parallel-size 4" in lines
    assert "+argv --pipeline-parallel-size 3" in lines
    assert "-env VLLM_PP_LAYER_PARTITION=12,12,12,7" in lines
    assert "+env VLLM_PP_LAYER_PARTITION=15,15,13" in lines
    assert not any(line.endswith("--kv-cache-dtype fp8") and line[0] in "+-" for line in lines)


if __name__ == "__main__":
    if sys.argv[1:] != ["--regenerate"]:
        sys.exit("usage: python -m tests.serving.test_build --regenerate")
    regenerate()
