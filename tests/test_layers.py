"""The layer contracts (pyproject ``[tool.importlinter]``) run as ``scripts/dev test`` runs them.

The real tree keeps every contract; a copy of the tree with one wrong arrow added fails,
naming the contract and the import, so CI catches a wrong import instead of a review.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("daemon", "web", "recovery", "serving", "hwcheck")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` in ``tree`` (it reads ``tree/pyproject.toml`` and imports from there)."""
    assert LINT_IMPORTS.exists(), "lint-imports missing: pip install -e '.[dev]'"
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache"],
        cwd=tree,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    """The product packages and pyproject.toml, copied: a tree we may break."""
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy2(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_real_tree_keeps_every_contract() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_copy_is_checked_from_the_copy(tree_copy: Path) -> None:
    result = lint_imports(tree_copy)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("package", "wrong_import", "contract"),
    [
        ("web", "daemon.token", "Layers"),
        ("hwcheck", "serving.errors", "Layers"),
        ("serving", "web.app", "Layers"),
        ("serving", "hwcheck.nvml.backend", "serving reads only hwcheck's models"),
        ("serving", "hwcheck.sim.rig", "serving reads only hwcheck's models"),
        ("recovery", "hwcheck.nvml.gateway", "recovery reads only models"),
    ],
)
def test_a_wrong_import_fails_the_lint(
    tree_copy: Path, package: str, wrong_import: str, contract: str
) -> None:
    breach = tree_copy / package / "layer_breach.py"
    breach.write_text(f'"""A wrong arrow."""\n\nimport {wrong_import}  # noqa: F401\n')
    result = lint_imports(tree_copy)
    assert result.returncode != 0, result.stdout
    broken = [line for line in result.stdout.splitlines() if " BROKEN" in line]  # (N ignored)
    assert any(line.startswith(contract) for line in broken), result.stdout
    assert f"{package}.layer_breach -> {wrong_import}" in result.stdout, result.stdout
