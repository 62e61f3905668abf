"""``scripts/dev``'s first run: one progress line, and packaging metadata that builds cleanly."""

from __future__ import annotations

import ast
import fnmatch
import os
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Stands in for python3 so the script's own output can be read without a real install:
# the version probe passes, ``-m venv DIR`` makes DIR/bin/python (this same stub), and
# ``-m pip ...`` talks the way pip and the build backend do, failing on request.
FAKE_PYTHON = """#!/bin/sh
if [ "$1" = "-c" ]; then exit 0; fi
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0
fi
echo "WARNING: Location 'file:///nowhere/simple/' is ignored" >&2
echo "  BuildBackendWarning: something you use is deprecated" >&2
if [ -n "$FAKE_PIP_FAILS" ]; then echo "ERROR: No matching distribution found" >&2; exit 1; fi
exit 0
"""


def project_copy(tmp_path: Path) -> Path:
    """The script and pyproject.toml in a scratch root (the script builds ROOT/.venv)."""
    (tmp_path / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "dev", tmp_path / "scripts" / "dev")
    shutil.copy2(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return tmp_path


def dev_venv(root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(root / "scripts" / "dev"), "venv"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHON": str(root / "fake-python"), "TMPDIR": str(root), **env},
    )


def test_first_venv_prints_only_its_progress_line(tmp_path: Path) -> None:
    root = project_copy(tmp_path)
    first = dev_venv(root)
    assert first.returncode == 0, first.stderr
    assert first.stdout == ""
    assert first.stderr == (
        f"dev: preparing {root}/.venv (first run downloads the dependencies)...\n"
    )
    assert (root / ".venv" / ".cmpfleet-installed").is_file()
    assert not list(root.glob("cmpfleet-venv.*")), "the install log was left behind"
    again = dev_venv(root)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")


def test_a_failed_install_shows_what_pip_said(tmp_path: Path) -> None:
    root = project_copy(tmp_path)
    result = dev_venv(root, FAKE_PIP_FAILS="1")
    assert result.returncode == 1
    assert "ERROR: No matching distribution found" in result.stderr
    last = result.stderr.splitlines()[-1]
    assert last.startswith(f"dev: building {root}/.venv failed"), last
    assert not (root / ".venv" / ".cmpfleet-installed").exists()


@pytest.mark.slow(seconds=5)
def test_package_metadata_builds_without_deprecation_warnings() -> None:
    """What the first ``scripts/dev venv`` builds (in pip's isolated build env), for real."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    result = subprocess.run(
        [*pip, "install", "--dry-run", "--no-deps", "--ignore-installed", "-e", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    noted = [
        line for line in (result.stdout + result.stderr).splitlines() if "deprecat" in line.lower()
    ]
    assert noted == [], "\n".join(noted)


def test_every_data_file_of_the_packages_ships() -> None:
    """docs/reference.md "Conventions": the example config, scenarios, presets (and the dashboard's
    assets) ship as package data: every non-Python file in a package matches a pattern."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["*"]
    left_out = [
        str(path.relative_to(ROOT))
        for package in ("daemon", "hwcheck", "serving", "recovery", "web")
        for path in (ROOT / package).rglob("*")
        if path.is_file()
        and path.suffix not in (".py", ".pyc")
        and not any(fnmatch.fnmatch(path.name, pattern) for pattern in patterns)
    ]
    assert left_out == []
    shipped = {"daemon/examples/fleet.toml", "hwcheck/sim/scenarios/healthy.toml"}
    shipped.add("serving/recipe/presets/dsv4-flash-pp4-dspark.toml")
    assert all((ROOT / name).is_file() for name in shipped), "the walk above saw them"


def test_nothing_imports_the_optional_vllm_extra() -> None:
    """docs/reference.md "Conventions": ``vllm`` is an optional extra; nothing imports it
    (fleetd runs the engine as a separate program, never in-process)."""
    importers = []
    for package in ("daemon", "hwcheck", "serving", "recovery", "web", "tests"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                if any(name.split(".")[0] == "vllm" for name in names):
                    importers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert importers == []
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(req.startswith("vllm") for req in extras["optional-dependencies"]["vllm"])
    assert not any(req.startswith("vllm") for req in extras["dependencies"])


def test_one_command_builds_the_wheel_a_rig_installs() -> None:
    """README "Installing on a rig": ``scripts/dev wheel`` makes the one file pip installs."""
    result = subprocess.run(
        [str(ROOT / "scripts" / "dev"), "wheel"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    wheel = Path(result.stdout.strip().splitlines()[-1])
    assert wheel.parent == ROOT / "dist" and wheel.name.startswith("cmpfleet-")
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    for shipped in ("daemon/install/fleetd.service", "daemon/examples/fleet.toml",
                    "web/dashboard/index.html", "hwcheck/sim/scenarios/healthy.toml"):  # fmt: skip
        assert shipped in names, shipped
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "fleetctl = " in zipfile.ZipFile(wheel).read(entry_points).decode()
