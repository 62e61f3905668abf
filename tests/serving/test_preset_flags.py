"""A recipe's ``extra_args`` add to its preset's flags, through ``fleetctl recipe show/lint``.

Replacing the preset's list used to launch DeepSeek V4 Flash without ``--trust-remote-code``,
the tokenizer mode, both parsers, the block size and the sequence cap, with lint only
warning: a 20 to 45 minute cold start of a broken engine. Real ``fleetctl`` processes.
"""

from __future__ import annotations

import json
from pathlib import Path

from serving.recipe.build import build_launch
from serving.recipe.flags import find_flag, split_flags
from serving.recipe.recipe import load_recipe, preset_recipe
from tests.support.cli import run_fleetctl_here

PP4 = "dsv4-flash-pp4-dspark"
NEEDED = (
    "--trust-remote-code",
    "--tokenizer-mode",
    "--tool-call-parser",
    "--reasoning-parser",
    "--block-size",
    "--max-num-seqs",
)


def _recipe(tmp_path: Path, *extra_args: str) -> Path:
    path = tmp_path / "recipe.toml"
    path.write_text(f'preset = "{PP4}"\nextra_args = {json.dumps(list(extra_args))}\n')
    return path


def _engine_flags(argv: list[str]) -> list[str]:
    """The flag names after the image (container mode): what vLLM is given."""
    image = argv.index(preset_recipe(PP4).image or "")
    return [group.name for group in split_flags(argv[image + 1 :]) if group.name]


def test_extra_args_add_to_the_preset_flags(tmp_path: Path) -> None:
    path = _recipe(tmp_path, "--disable-log-requests")
    shown = run_fleetctl_here("--json", "recipe", "show", str(path))
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    flags = _engine_flags(document["argv"])
    assert set(NEEDED) <= set(flags)
    assert "--disable-log-requests" in flags
    assert document["preset_overrides"] == []
    # the launch the daemon builds is the one shown
    assert list(build_launch(load_recipe(path)).argv) == document["argv"]
    linted = run_fleetctl_here("--json", "recipe", "lint", str(path))
    rules = {finding["rule"] for finding in json.loads(linted.stdout)}
    assert "reasoning-parser" not in rules and "preset-flag-dropped" not in rules
    assert linted.returncode != 2, linted.stdout


def test_a_flag_given_again_replaces_only_its_value_and_show_says_so(tmp_path: Path) -> None:
    path = _recipe(tmp_path, "--max-num-seqs=4", "--disable-log-requests")
    document = json.loads(run_fleetctl_here("--json", "recipe", "show", str(path)).stdout)
    groups = split_flags(document["argv"][document["argv"].index("dsv4-a100:devel") + 1 :])
    seqs = find_flag(groups, "--max-num-seqs")
    assert seqs is not None and seqs.value == "4"
    assert [group.name for group in groups].count("--max-num-seqs") == 1
    assert set(NEEDED) <= {group.name for group in groups}
    assert document["preset_overrides"] == [
        {
            "flag": "--max-num-seqs",
            "preset": ["--max-num-seqs", "8"],
            "recipe": ["--max-num-seqs=4"],
            "dropped": False,
        }
    ]
    human = run_fleetctl_here("recipe", "show", str(path))
    assert human.returncode == 0, human.stderr
    assert "preset flags overridden by extra_args:" in human.stdout
    assert "--max-num-seqs 8 -> --max-num-seqs=4" in human.stdout


def test_turning_off_a_preset_flag_is_a_lint_error(tmp_path: Path) -> None:
    path = _recipe(tmp_path, "--no-trust-remote-code")
    linted = run_fleetctl_here("--json", "recipe", "lint", str(path))
    assert linted.returncode == 2, linted.stdout
    dropped = [f for f in json.loads(linted.stdout) if f["rule"] == "preset-flag-dropped"]
    assert [(f["severity"], f["key"]) for f in dropped] == [("error", "--no-trust-remote-code")]
    human = run_fleetctl_here("recipe", "show", str(path))
    assert "--trust-remote-code turned off by --no-trust-remote-code" in human.stdout


def test_a_recipe_repeating_the_preset_value_overrides_nothing(tmp_path: Path) -> None:
    path = _recipe(tmp_path, "--block-size", "256")
    document = json.loads(run_fleetctl_here("--json", "recipe", "show", str(path)).stdout)
    assert document["preset_overrides"] == []
    assert _engine_flags(document["argv"]).count("--block-size") == 1
