"""Real working launches of other models and sizes (``examples/recipes/``) lint with no
errors, and ``recipe show`` gives their exact argv and environment (goldens).

GLM-5.3 with MTP (45 and 78 layers), DeepSeek V4.1 (40 layers) on 6 and 8 cards, Qwen3
with MTP under TP4 x PP2, and a 6-card TP2 x PP3 on cards 0-5. After an intended change,
regenerate the goldens with ``.venv/bin/python -m tests.serving.test_example_recipes
--regenerate`` and review the diff.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from serving.recipe.build import build_launch, spec_to_dict
from serving.recipe.lint import RigCards, lint_path, lint_recipe
from serving.recipe.recipe import load_recipe
from tests.support.cli import run_fleetctl_here

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "recipes"
GOLDEN = Path(__file__).parent / "golden" / "examples"
RECIPES = sorted(path.name for path in EXAMPLES.glob("*.toml"))
EIGHT_CARDS = RigCards(count=8)


def _document(name: str) -> str:
    spec = build_launch(load_recipe(EXAMPLES / name), python="/opt/cmpfleet/venv/bin/python")
    return json.dumps(spec_to_dict(spec), indent=2, sort_keys=True) + "\n"


def regenerate() -> None:
    """Rewrite the goldens from the current code (run by hand, never by pytest)."""
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name in RECIPES:
        (GOLDEN / name.replace(".toml", ".json")).write_text(_document(name))


def test_the_issue_s_launches_are_all_here() -> None:
    assert RECIPES == [
        "dsv41-flash-pp6.toml",
        "dsv41-flash-pp8.toml",
        "glm53-flash-mtp-pp4.toml",
        "glm53-flash-tp2-pp3-cards0-5.toml",
        "glm53-int4-mtp-pp8.toml",
        "qwen3-mtp-tp4-pp2.toml",
    ]


@pytest.mark.parametrize("name", RECIPES)
def test_each_lints_with_no_errors_on_an_8_card_rig(name: str) -> None:
    findings = lint_path(EXAMPLES / name, host_checks=False, cards=EIGHT_CARDS)
    assert [f.line() for f in findings if f.severity != "note"] == []


@pytest.mark.parametrize("name", RECIPES)
def test_each_lints_with_no_errors_when_its_family_is_inferred(name: str) -> None:
    """Spelled out without ``family`` (as owners copy them): the evidence never refuses them."""
    table = load_recipe(EXAMPLES / name).model_dump(mode="json", exclude_none=True)
    table.pop("family", None)
    findings = lint_recipe(table, host_checks=False, cards=EIGHT_CARDS)
    assert [f.line() for f in findings if f.severity == "error"] == []


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_show_gives_the_exact_argv_and_env(name: str) -> None:
    golden = GOLDEN / name.replace(".toml", ".json")
    assert golden.is_file(), f"missing golden {golden.name}: run the regenerate command"
    assert json.loads(_document(name)) == json.loads(golden.read_text())


def test_the_6_card_profile_names_its_cards_and_publishes_on_the_lan() -> None:
    spec = build_launch(load_recipe(EXAMPLES / "glm53-flash-tp2-pp3-cards0-5.toml"))
    argv = list(spec.argv)
    assert argv[argv.index("--gpus") + 1] == '"device=0,1,2,3,4,5"'
    assert argv[argv.index("-p") + 1] == "0.0.0.0:8098:8000"
    assert spec.base_url == "http://127.0.0.1:8098"  # fleetd probes it on loopback
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert argv[argv.index("--pipeline-parallel-size") + 1] == "3"


def test_fleetctl_recipe_show_prints_them() -> None:
    shown = run_fleetctl_here("--json", "recipe", "show", str(EXAMPLES / "qwen3-mtp-tp4-pp2.toml"))
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == json.loads(_document("qwen3-mtp-tp4-pp2.toml"))


if __name__ == "__main__" and "--regenerate" in sys.argv:
    regenerate()
