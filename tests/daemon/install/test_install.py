"""``fleetd install``/``uninstall`` from the wheel, as a rig owner runs them.

The wheel is built once for the module from a copy of the packages and installed into a
fresh virtualenv (its dependencies are this venv's, made visible by a ``.pth`` line, so no
download is needed); every command runs that venv's ``fleetd``. The unit it writes is
rated by ``systemd-analyze security --offline=true`` and verified. ``scripts/install.sh``
is a thin wrapper over the same command.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.cli import one_clean_line
from tests.support.systemd_analyze import MAX_EXPOSURE, analyze, exposure

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("daemon", "hwcheck", "serving", "recovery", "web")
UNIT = Path("etc/systemd/system/fleetd.service")
CONFIG = Path("etc/cmpfleet/fleet.toml")
STATE = Path("var/lib/cmpfleet")


@dataclass(frozen=True)
class FreshVenv:
    """A virtualenv holding only the wheel (dependencies borrowed from this venv)."""

    path: Path

    @property
    def fleetd(self) -> Path:
        return self.path / "bin" / "fleetd"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.fleetd), *args], capture_output=True, text=True, timeout=120, check=False
        )


def _pip(*args: str, cwd: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=cwd,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> FreshVenv:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for package in PACKAGES:  # a copy: the build never writes into the checkout
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    # This venv's setuptools (the dev extra): no isolated build env to set up.
    _pip(
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        str(work / "dist"),
        str(source),
        cwd=work,
    )
    (wheel,) = (work / "dist").glob("cmpfleet-*.whl")
    fresh = FreshVenv(work / "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh.path)], check=True)
    python = fresh.path / "bin" / "python"
    _pip("--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel), cwd=work)
    # The dependencies: this venv's site-packages, after the fresh one's (a plain path
    # line: this venv's editable finder for the checkout is not loaded there).
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=work,  # not the checkout: python -c puts the working dir first on sys.path
    ).stdout.strip()
    Path(site, "cmpfleet-test-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    where = subprocess.run(
        [str(python), "-c", "import daemon.install; print(daemon.install.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=work,
    ).stdout
    assert where.startswith(str(fresh.path)), where  # the wheel's code, not the checkout's
    return fresh


def test_install_from_the_wheel_writes_a_verified_hardened_unit(
    venv: FreshVenv, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    result = venv.run("install", "--root", str(root))
    assert result.returncode == 0, result.stderr
    unit = root / UNIT
    assert f"ExecStart={venv.fleetd} --config /etc/cmpfleet/fleet.toml " in unit.read_text()
    assert (root / CONFIG).read_text() == (ROOT / "daemon/examples/fleet.toml").read_text()
    modes = {path: (root / path).stat().st_mode & 0o777 for path in (UNIT, CONFIG, STATE)}
    assert modes == {UNIT: 0o644, CONFIG: 0o640, STATE: 0o700}
    assert (root / CONFIG).parent.stat().st_mode & 0o777 == 0o750
    assert f"wrote {unit}" in result.stdout and "next:" in result.stdout
    assert "init --force" in result.stdout and "systemctl enable --now fleetd" in result.stdout
    score, _ = exposure(unit)
    assert score <= MAX_EXPOSURE
    verified = analyze("verify", str(unit))
    assert verified.returncode == 0, verified.stderr
    assert "fleetd.service" not in verified.stderr, verified.stderr


def test_a_config_is_never_overwritten_and_a_dry_run_changes_nothing(
    venv: FreshVenv, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    planned = venv.run("install", "--root", str(root), "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert f"would write {root / UNIT}" in planned.stdout
    assert not root.exists()
    assert venv.run("install", "--root", str(root)).returncode == 0
    (root / CONFIG).write_text("[rig]\ncard_count = 3\n")
    (root / UNIT).write_text("[Service]\nExecStart=/old/fleetd\n")  # an older install
    again = venv.run("install", "--root", str(root))
    assert again.returncode == 0, again.stderr
    assert f"kept {root / CONFIG}" in again.stdout and f"updated {root / UNIT}" in again.stdout
    assert (root / CONFIG).read_text() == "[rig]\ncard_count = 3\n"
    assert str(venv.fleetd) in (root / UNIT).read_text()


def test_uninstall_removes_the_unit_only(venv: FreshVenv, tmp_path: Path) -> None:
    root = tmp_path / "root"
    assert venv.run("install", "--root", str(root)).returncode == 0
    wants = root / "etc/systemd/system/multi-user.target.wants/fleetd.service"
    wants.parent.mkdir()
    wants.symlink_to("/etc/systemd/system/fleetd.service")  # as `systemctl enable` makes it
    (root / STATE / "fleet.db").write_text("history")
    removed = venv.run("uninstall", "--root", str(root))
    assert removed.returncode == 0, removed.stderr
    assert not (root / UNIT).exists() and not wants.is_symlink()
    assert (root / CONFIG).exists() and (root / STATE / "fleet.db").read_text() == "history"


def test_bad_input_is_one_line(venv: FreshVenv, tmp_path: Path) -> None:
    bogus = venv.run("install", "--bogus")
    assert bogus.returncode == 2
    assert "unrecognized arguments: --bogus" in one_clean_line(bogus.stderr, "fleetd install")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    blocked = venv.run("install", "--root", str(a_file))
    assert blocked.returncode == 1
    assert one_clean_line(blocked.stderr, "fleetd install").startswith("fleetd install: cannot")


def test_install_script_is_a_thin_wrapper(venv: FreshVenv, tmp_path: Path) -> None:
    script = ROOT / "scripts" / "install.sh"
    root = tmp_path / "root"
    run = [str(script), "--root", str(root), "--venv", str(venv.path), "--skip-venv"]
    first = subprocess.run(run, capture_output=True, text=True, timeout=120, check=False)
    assert first.returncode == 0, first.stderr
    assert f"ExecStart={venv.fleetd} " in (root / UNIT).read_text()
    assert (root / CONFIG).read_text() == (ROOT / "daemon/examples/fleet.toml").read_text()
    bad = subprocess.run([*run, "--bogus"], capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "unknown option --bogus" in bad.stderr


def test_the_wheel_ships_the_memory_test_kernels(venv: FreshVenv) -> None:
    """The PTX is package data: a rig installed from the wheel can load it (no checkout)."""
    python = venv.path / "bin" / "python"
    where = str(venv.path)
    probe = (
        "import hwcheck.memtest.cuda as m; t = m.ptx_text(); "
        f"print(m.__file__.startswith({where!r}), b'.entry memtest_verify' in t)"
    )
    done = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, check=False, cwd=venv.path
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]
