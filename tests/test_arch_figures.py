"""``scripts/dev arch`` prints every architecture figure, and each figure sees what it counts.

The real checkout is measured once (every heading, a row per product package, ten
functions); a small tree written here has one arrow of each wrong kind, a cycle at run
time, a cycle closed only under ``TYPE_CHECKING`` and a long function, and each must be
named where it belongs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from textwrap import dedent

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARCH = ROOT / "scripts" / "arch.py"
HEADINGS = (
    "== files per folder",
    "== share of product lines per folder",
    "== share of product lines per package (recursive",
    "== import arrows running back up",
    "== import cycles between modules",
    "== cycles closed only by TYPE_CHECKING imports",
    "== the 10 longest functions",
    "== duplicate pairs",
)


def arch(root: Path, path: str | None = None) -> str:
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    result = subprocess.run(
        [sys.executable, str(ARCH), "--root", str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout


def section(report: str, heading: str) -> list[str]:
    """The lines under ``heading`` up to the next blank line or heading."""
    lines = report.split(heading, 1)[1].splitlines()[1:]
    body: list[str] = []
    for line in lines:
        if not line.strip() or line.startswith("=="):
            break
        body.append(line)
    return body


def test_the_checkout_gets_every_figure() -> None:
    report = arch(ROOT)
    for heading in HEADINGS:
        assert heading in report, heading
    recursive = section(report, "== share of product lines per package (recursive")
    for package in ("daemon", "web", "recovery", "serving", "hwcheck"):
        assert any(
            re.fullmatch(rf"\s*[\d.]+%\s+\d+\s+{package}(  over 30%)?", r) for r in recursive
        )
    longest = section(report, "== the 10 longest functions")
    assert len(longest) == 10
    assert all(re.fullmatch(r"\s*\d+  \S+  \S+\.py:\d+", row) for row in longest), longest
    lengths = [int(row.split()[0]) for row in longest]
    assert lengths == sorted(lengths, reverse=True)
    duplicates = section(report, "== duplicate pairs")
    assert len(duplicates) == 1
    assert re.match(r"(\d+ pairs of places|duplicates is not on PATH)", duplicates[0])


@pytest.fixture
def small_tree(tmp_path: Path) -> Path:
    """Two packages under two layers contracts, with every kind of wrong arrow."""
    files = {
        "pyproject.toml": """
            [tool.importlinter]
            root_packages = ["archhigh", "archlow"]

            [[tool.importlinter.contracts]]
            name = "Layers: high > low"
            type = "layers"
            layers = ["archhigh", "archlow"]

            [[tool.importlinter.contracts]]
            name = "high's wings"
            type = "layers"
            containers = ["archhigh"]
            layers = ["top", "left | right", "base"]
        """,
        "archhigh/__init__.py": "",
        "archhigh/top.py": "from archhigh import left\n",
        "archhigh/left.py": "from archhigh import right\n",
        "archhigh/right.py": """
            from typing import TYPE_CHECKING

            if TYPE_CHECKING:
                from archhigh import top
        """,
        "archhigh/base.py": "from archhigh import top\n",
        "archlow/__init__.py": "",
        "archlow/up.py": "import archhigh.base\n",
        "archlow/ping.py": "from archlow import pong\n",
        "archlow/pong.py": "from archlow import ping\n",
        "archlow/hint.py": """
            from typing import TYPE_CHECKING

            if TYPE_CHECKING:
                from archlow import user
        """,
        "archlow/user.py": "from archlow import hint\n",
        "archlow/long.py": "def long():\n" + "    x = 1\n" * 40 + "    return x\n",
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text).lstrip())
    return tmp_path


def test_each_figure_names_what_is_wrong_in_a_small_tree(small_tree: Path) -> None:
    report = arch(small_tree, path=str(small_tree))  # no duplicates tool on this PATH
    per_folder = section(report, "== files per folder")
    assert per_folder == ["   4  archhigh", "   6  archlow"]
    recursive = section(report, "== share of product lines per package (recursive")
    assert recursive == [" 12.3%       7  archhigh", " 87.7%      50  archlow  over 30%"]

    arrows = section(report, "== import arrows running back up")
    assert arrows == [
        "   1 of 1 arrows between layers run against them: Layers: high > low [product]",
        "        archlow.up:1 -> archhigh.base",
        "   3 of 4 arrows between layers run against them: high's wings [archhigh]",
        "        archhigh.base:1 -> archhigh.top",
        "        archhigh.left:1 -> archhigh.right  (across independent siblings)",
        "        archhigh.right:4 -> archhigh.top  (type only)",
    ]

    runtime = section(report, "== import cycles between modules")
    assert runtime == ["  2 modules: archlow.ping -> archlow.pong -> archlow.ping"]
    assert "== import cycles between modules: 1 at run time" in report
    type_only = section(report, "== cycles closed only by TYPE_CHECKING imports")
    assert type_only == [
        "  3 modules: archhigh.left -> archhigh.right -> archhigh.top -> archhigh.left",
        "  2 modules: archlow.hint -> archlow.user -> archlow.hint",
    ]

    longest = section(report, "== the 10 longest functions")
    assert longest[0] == "  42  long  archlow/long.py:1"
    assert section(report, "== duplicate pairs") == [
        "duplicates is not on PATH (optional): figure skipped"
    ]
