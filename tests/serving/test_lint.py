"""The recipe linter: presets lint clean, every rule fires on a recipe that breaks it.

Each bad recipe is a tiny table on top of a clean preset, so exactly the rule under test
fires; host checks use this host for real (a bound loopback socket, missing paths, PATH).
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from serving.recipe.findings import Finding
from serving.recipe.lint import exit_code, lint_path, lint_recipe
from serving.recipe.presets import preset_names
from serving.recipe.recipe import preset_recipe
from serving.runtime import ports
from tests.support.cli import run_fleetctl_here

SIM = "sim-engine"
PP4 = "dsv4-flash-pp4-dspark"


def _facts(findings: list[Finding]) -> list[tuple[str, str, str, str]]:
    return [(f.rule, f.severity, f.key, f.value) for f in findings]


def _lint(preset: str, host_checks: bool = False, **overrides: Any) -> list[Finding]:
    return lint_recipe({"preset": preset, **overrides}, host_checks=host_checks)


def _with_env(preset: str, **env: str) -> dict[str, Any]:
    return {"env": {**preset_recipe(preset).env, **env}}


def _without_env(preset: str, name: str) -> dict[str, Any]:
    return {"env": {k: v for k, v in preset_recipe(preset).env.items() if k != name}}


def _extra(preset: str, *, drop: tuple[str, ...] = (), add: tuple[str, ...] = ()) -> dict[str, Any]:
    """The preset's extra_args without the flags in ``drop`` (and their values), plus ``add``."""
    kept: list[str] = []
    skipping = False
    for token in preset_recipe(preset).extra_args:
        if token.startswith("--"):
            skipping = token in drop
        if not skipping:
            kept.append(token)
    return {"extra_args": [*kept, *add]}


@pytest.mark.parametrize("preset", sorted(preset_names()))
def test_presets_lint_clean_without_host_checks(preset: str) -> None:
    findings = lint_recipe({"preset": preset}, host_checks=False)
    assert findings == []
    assert exit_code(findings) == 0


def test_sim_engine_lints_clean_on_this_host() -> None:
    assert lint_recipe({"preset": SIM}, host_checks=True) == []


RULE_CASES: list[tuple[str, str, dict[str, Any], tuple[str, str, str, str]]] = [
    (
        "partition count",
        SIM,
        {"layer_partition": [15, 15, 13]},
        ("partition-count", "error", "layer_partition", "[15, 15, 13]"),
    ),
    (
        "partition sum",
        SIM,
        {"layer_partition": [12, 12, 12, 8]},
        ("partition-sum", "error", "layer_partition", "[12, 12, 12, 8]"),
    ),
    (
        "partition sum from env",
        SIM,
        {"layer_partition": None, **_with_env(SIM, VLLM_PP_LAYER_PARTITION="11,11,11,11")},
        ("partition-sum", "error", "env.VLLM_PP_LAYER_PARTITION", "11,11,11,11"),
    ),
    (
        "partition conflict",
        SIM,
        _with_env(SIM, VLLM_PP_LAYER_PARTITION="11,11,11,10"),
        ("partition-conflict", "error", "env.VLLM_PP_LAYER_PARTITION", "11,11,11,10"),
    ),
    (
        "partition missing",
        SIM,
        {"layer_partition": None},
        ("partition-missing", "warning", "layer_partition", ""),
    ),
    (
        "dspark tokens",
        SIM,
        {"speculative": {"num_speculative_tokens": 7}},
        ("speculative-tokens", "error", "speculative.num_speculative_tokens", "7"),
    ),
    (
        "dspark tokens in extra_args",
        SIM,
        {
            "speculative": None,
            **_extra(
                SIM, add=("--speculative-config", '{"method":"dspark","num_speculative_tokens":7}')
            ),
        },
        ("speculative-tokens", "error", "--speculative-config", "7"),
    ),
    (
        "mtp method",
        SIM,
        {"speculative": {"method": "mtp", "num_speculative_tokens": 1}},
        ("speculative-method", "error", "speculative.method", "mtp"),
    ),
    (
        "enforce eager",
        SIM,
        _extra(SIM, add=("--enforce-eager",)),
        ("enforce-eager", "error", "--enforce-eager", "true"),
    ),
    (
        "row chunk unset",
        SIM,
        _without_env(SIM, "DSV4_LOGITS_ROW_CHUNK"),
        ("row-chunk-unset", "error", "env.DSV4_LOGITS_ROW_CHUNK", ""),
    ),
    (
        "row chunk zero",
        SIM,
        _with_env(SIM, DSV4_LOGITS_ROW_CHUNK="0"),
        ("row-chunk-unset", "error", "env.DSV4_LOGITS_ROW_CHUNK", "0"),
    ),
    (
        "row chunk 128",
        SIM,
        _with_env(SIM, DSV4_LOGITS_ROW_CHUNK="128"),
        ("row-chunk-high", "warning", "env.DSV4_LOGITS_ROW_CHUNK", "128"),
    ),
    (
        "row chunk not a number",
        SIM,
        _with_env(SIM, DSV4_LOGITS_ROW_CHUNK="sixty-four"),
        ("invalid-value", "error", "env.DSV4_LOGITS_ROW_CHUNK", "sixty-four"),
    ),
    (
        "no reasoning parser",
        SIM,
        _extra(SIM, drop=("--reasoning-parser",)),
        ("reasoning-parser", "warning", "--reasoning-parser", ""),
    ),
    (
        "auto tool choice without parser",
        SIM,
        _extra(SIM, drop=("--tool-call-parser",)),
        ("tool-call-parser", "error", "--enable-auto-tool-choice", "true"),
    ),
    (
        "multiproc fork",
        SIM,
        _with_env(SIM, VLLM_WORKER_MULTIPROC_METHOD="fork"),
        ("multiproc-method", "error", "env.VLLM_WORKER_MULTIPROC_METHOD", "fork"),
    ),
    (
        "multiproc unset",
        SIM,
        _without_env(SIM, "VLLM_WORKER_MULTIPROC_METHOD"),
        ("multiproc-method", "error", "env.VLLM_WORKER_MULTIPROC_METHOD", ""),
    ),
    (
        "expandable segments",
        SIM,
        _with_env(
            SIM, PYTORCH_CUDA_ALLOC_CONF="garbage_collection_threshold:0.6,expandable_segments:True"
        ),
        (
            "expandable-segments",
            "error",
            "env.PYTORCH_CUDA_ALLOC_CONF",
            "garbage_collection_threshold:0.6,expandable_segments:True",
        ),
    ),
    (
        "gpu memory typed",
        SIM,
        {"gpu_memory_utilization": 0.97},
        ("gpu-memory-utilization", "error", "gpu_memory_utilization", "0.97"),
    ),
    (
        "gpu memory flag with equals",
        SIM,
        {"gpu_memory_utilization": None, **_extra(SIM, add=("--gpu-memory-utilization=0.98",))},
        ("gpu-memory-utilization", "error", "--gpu-memory-utilization", "0.98"),
    ),
    (
        "gpu memory flag with space",
        SIM,
        {"gpu_memory_utilization": None, **_extra(SIM, add=("--gpu_memory_utilization", "0.99"))},
        ("gpu-memory-utilization", "error", "--gpu-memory-utilization", "0.99"),
    ),
    (
        "shm too small",
        PP4,
        {"shm_size": "8g"},
        ("shm-size", "error", "shm_size", "8g"),
    ),
    (
        "shm unset",
        PP4,
        {"shm_size": None},
        ("shm-size", "error", "shm_size", ""),
    ),
    (
        "duplicate flag",
        SIM,
        _extra(SIM, add=("--pipeline-parallel-size", "2")),
        ("duplicate-flag", "error", "--pipeline-parallel-size", "2"),
    ),
    (
        "port in extra_args",
        SIM,
        _extra(SIM, add=("--port=9000",)),
        ("duplicate-flag", "error", "--port", "9000"),
    ),
    (
        "container key in process mode",
        SIM,
        {"shm_size": "16g"},
        ("ignored-key", "warning", "shm_size", "16g"),
    ),
    (
        "unknown key",
        SIM,
        {"spec_tokens": 5},
        ("unknown-key", "error", "spec_tokens", "5"),
    ),
    (
        "wrong type",
        SIM,
        {"max_model_len": "32k"},
        ("invalid-value", "error", "max_model_len", '"32k"'),
    ),
    (
        "unknown preset",
        "dsv4-flash-pp5",
        {},
        ("unknown-preset", "error", "preset", '"dsv4-flash-pp5"'),
    ),
]


def _table(preset: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """The preset plus ``overrides``; a ``None`` override removes the key.

    A recipe cannot unset a preset's key (``[env]`` merges key-wise, ``extra_args`` adds
    to the preset's flags), so a case that needs a key, variable or flag gone spells the
    preset out in full (its dump) and replaces ``env`` or ``extra_args``.
    """
    removed = {key for key, value in overrides.items() if value is None}
    if not removed and "env" not in overrides and "extra_args" not in overrides:
        return {"preset": preset, **overrides}
    table = preset_recipe(preset).model_dump(mode="json", exclude_none=True)
    table.update({key: value for key, value in overrides.items() if value is not None})
    return {key: value for key, value in table.items() if key not in removed}


@pytest.mark.parametrize(
    ("preset", "overrides", "expected"),
    [pytest.param(p, o, e, id=name) for name, p, o, e in RULE_CASES],
)
def test_each_rule_fires_alone(
    preset: str, overrides: dict[str, Any], expected: tuple[str, str, str, str]
) -> None:
    findings = lint_recipe(_table(preset, overrides), host_checks=False)
    assert _facts(findings) == [expected]
    assert exit_code(findings) == (2 if expected[1] == "error" else 1)


@pytest.mark.parametrize("preset", sorted(preset_names()))
def test_spelled_out_presets_lint_clean(preset: str) -> None:
    table = preset_recipe(preset).model_dump(mode="json", exclude_none=True)
    assert "preset" not in table
    assert lint_recipe(table, host_checks=False) == []


def test_value_errors_stop_the_rules_but_unknown_keys_do_not() -> None:
    findings = lint_recipe(
        {"preset": SIM, "bogus": 1, "layer_partition": [4, 3, 2, 1]}, host_checks=False
    )
    assert [f.rule for f in findings] == ["unknown-key", "partition-sum"]
    findings = lint_recipe({"preset": SIM, "port": "x", "layer_partition": [1]}, host_checks=False)
    assert [f.rule for f in findings] == ["invalid-value"]


def test_all_errors_at_once() -> None:
    table = _table(
        SIM,
        {
            "layer_partition": [12, 12, 12, 8],
            "speculative": {"method": "dspark", "num_speculative_tokens": 7},
            "env": {"DSV4_LOGITS_ROW_CHUNK": "0"},
        },
    )
    findings = lint_recipe(table, host_checks=False)
    rules = {f.rule for f in findings}
    assert {"partition-sum", "speculative-tokens", "row-chunk-unset", "multiproc-method"} <= rules


# --- host checks: this host, for real -------------------------------------------------


@pytest.fixture
def listening_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def test_port_in_use_is_a_warning(listening_port: int) -> None:
    findings = _lint(SIM, host_checks=True, port=listening_port)
    assert _facts(findings) == [("port-in-use", "warning", "port", str(listening_port))]
    assert exit_code(findings) == 1


def test_free_port_is_fine() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    assert _lint(SIM, host_checks=True, port=free) == []


def test_port_zero_is_not_probed() -> None:
    def never(host: str, port: int) -> bool:
        raise AssertionError(f"probed {host}:{port}")

    assert lint_recipe({"preset": SIM}, host_checks=True, port_in_use=never) == []


def test_injected_port_probe() -> None:
    seen: list[tuple[str, int]] = []

    def taken(host: str, port: int) -> bool:
        seen.append((host, port))
        return True

    findings = lint_recipe({"preset": SIM, "port": 8098}, host_checks=True, port_in_use=taken)
    assert seen == [("127.0.0.1", 8098)]
    assert _facts(findings) == [("port-in-use", "warning", "port", "8098")]


def test_address_not_on_this_host_is_a_warning() -> None:
    findings = _lint(SIM, host_checks=True, host="192.0.2.1", port=8098)
    assert [(f.rule, f.severity, f.key) for f in findings] == [("port-check", "warning", "host")]


def test_missing_model_path_is_a_warning(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    findings = _lint(SIM, host_checks=True, model=str(missing))
    assert _facts(findings) == [("model-path", "warning", "model", str(missing))]
    assert _lint(SIM, host_checks=True, model=str(tmp_path)) == []


def test_hub_ids_are_not_paths() -> None:
    assert _lint(SIM, host_checks=True, model="deepseek-ai/DeepSeek-V4-Flash-0731") == []


def test_command_not_on_path_is_a_warning(tmp_path: Path) -> None:
    findings = _lint(SIM, host_checks=True, command=["cmpfleet-no-such-vllm", "serve"])
    assert _facts(findings) == [
        ("command-not-found", "warning", "command", "cmpfleet-no-such-vllm")
    ]
    not_executable = tmp_path / "vllm"
    not_executable.write_text("#!/bin/sh\n")
    findings = _lint(SIM, host_checks=True, command=[str(not_executable), "serve"])
    assert [f.rule for f in findings] == ["command-not-found"]


def test_python_placeholder_resolves_for_the_check() -> None:
    findings = lint_recipe({"preset": SIM}, host_checks=True, python="/nonexistent/python")
    assert _facts(findings) == [("command-not-found", "warning", "command", "/nonexistent/python")]
    assert lint_recipe({"preset": SIM}, host_checks=True, python=sys.executable) == []


def test_container_runtime_and_mount_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    missing = tmp_path / "models"
    findings = lint_recipe(
        {"preset": PP4, "mounts": [f"{missing}:/models:ro", "hfcache:/root/.cache"]},
        host_checks=True,
        port_in_use=lambda host, port: False,
    )
    assert _facts(findings) == [
        ("command-not-found", "warning", "mode", "docker"),
        ("mount-source", "warning", "mounts[0]", f"{missing}:/models:ro"),
    ]
    missing.mkdir()
    runtime = tmp_path / "docker"
    runtime.write_text("#!/bin/sh\n")
    runtime.chmod(0o755)
    findings = lint_recipe(
        {"preset": PP4, "mounts": [f"{missing}:/models:ro"]},
        host_checks=True,
        port_in_use=lambda host, port: False,
    )
    assert findings == []


# --- files, exit codes, output forms ---------------------------------------------------


def test_lint_path_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "recipe.toml"
    path.write_text('preset = "sim-engine"\nport = \n')
    findings = lint_path(path, host_checks=False)
    assert [(f.rule, f.severity) for f in findings] == [("unreadable", "error")]
    assert "line 2" in findings[0].reason
    assert exit_code(findings) == 2


def test_lint_path_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "recipe.toml"
    path.write_text('preset = "sim-engine"\n[env]\nDSV4_LOGITS_ROW_CHUNK = "128"\n')
    findings = lint_path(path, host_checks=False)
    assert _facts(findings) == [("row-chunk-high", "warning", "env.DSV4_LOGITS_ROW_CHUNK", "128")]
    assert exit_code(findings) == 1


def test_lint_accepts_a_recipe_object() -> None:
    assert lint_recipe(preset_recipe(PP4), host_checks=False) == []


def test_exit_codes() -> None:
    warning = Finding("w", "warning", "k", "v", "r")
    error = Finding("e", "error", "k", "v", "r")
    assert exit_code([]) == 0
    assert exit_code([warning]) == 1
    assert exit_code([warning, error]) == 2


def test_finding_forms() -> None:
    finding = Finding("partition-sum", "error", "layer_partition", "[1]", "sums to 1")
    assert finding.line() == "error [partition-sum] layer_partition = [1]: sums to 1"
    assert finding.to_dict() == {
        "rule": "partition-sum",
        "severity": "error",
        "key": "layer_partition",
        "value": "[1]",
        "reason": "sums to 1",
    }
    unset = Finding("row-chunk-unset", "error", "env.DSV4_LOGITS_ROW_CHUNK", "", "set 64")
    assert unset.line() == "error [row-chunk-unset] env.DSV4_LOGITS_ROW_CHUNK (unset): set 64"


# --- the bind probe itself (serving.runtime.ports), used by the linter and the daemon ----------


def test_port_probe_sees_a_listener(listening_port: int) -> None:
    assert ports.port_in_use("127.0.0.1", listening_port) is True


def test_free_port_is_bindable_and_reported_free() -> None:
    port = ports.free_port("127.0.0.1")
    assert 0 < port < 65536
    assert ports.port_in_use("127.0.0.1", port) is False


def test_port_probe_raises_for_a_foreign_address() -> None:
    with pytest.raises(OSError, match="assign"):
        ports.port_in_use("192.0.2.1", 8098)


LINT_CASES = {
    "clean": ('preset = "sim-engine"\n', 0, []),
    # Host-dependent findings only: warnings, exit 1.
    "host": (
        'preset = "sim-engine"\nmodel = "/nonexistent/model"\ncommand = ["no-such-cmd-xyz"]\n',
        1,
        [("command-not-found", "warning", "command"), ("model-path", "warning", "model")],
    ),
    "errors": (
        'preset = "sim-engine"\nlayer_partition = [10, 10, 10]\nbogus_key = 1\n'
        '[speculative]\nnum_speculative_tokens = 7\n[env]\nDSV4_LOGITS_ROW_CHUNK = "abc"\n',
        2,
        [
            ("unknown-key", "error", "bogus_key"),
            ("partition-count", "error", "layer_partition"),
            ("partition-sum", "error", "layer_partition"),
            ("speculative-tokens", "error", "speculative.num_speculative_tokens"),
            ("invalid-value", "error", "env.DSV4_LOGITS_ROW_CHUNK"),
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(LINT_CASES))
def test_fleetctl_recipe_lint_exit_codes_and_findings(case: str, tmp_path: Path) -> None:
    """docs/reference.md "Lint rules": exit 0 clean, 1 warnings only, 2 errors; each names its rule,
    the recipe key, the offending value and why; --json (either place) lists them."""
    text, code, expected = LINT_CASES[case]
    path = tmp_path / "recipe.toml"
    path.write_text(text)
    first = run_fleetctl_here("--json", "recipe", "lint", str(path))
    assert (first.returncode, first.stderr) == (code, ""), first.stdout
    findings = json.loads(first.stdout)
    assert [(f["rule"], f["severity"], f["key"]) for f in findings] == expected
    for finding in findings:
        assert finding["value"] and finding["reason"]
    last = run_fleetctl_here("recipe", "lint", str(path), "--json")
    assert (last.returncode, json.loads(last.stdout)) == (code, findings)
    human = run_fleetctl_here("recipe", "lint", str(path))
    assert human.returncode == code
    for rule, severity, key in expected:
        assert f"{severity} [{rule}] {key}" in human.stdout, human.stdout
