"""The README's quick tour, pasted line by line into a fresh shell, does what it says.

The commands are read from the README itself, so the test breaks when the README drifts.
The tour runs while ``scripts/dev run`` holds another terminal: here that daemon is a real
simulated fleetd on a free port, which the tour's commands reach through ``FLEETCTL_URL``
and ``CMPFLEET_STATE_DIR`` (what ``scripts/dev fleetctl`` points at ``state/sim``).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.fleetd import Fleetd, start_fleetd, stop_all

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=10)

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


@dataclass(frozen=True)
class TourStep:
    """One line of the tour: the command and the exit codes its comment promises."""

    command: str
    exit_codes: frozenset[int]


def code_blocks(markdown: str, heading: str) -> list[str]:
    """The ```sh blocks of the section under ``heading`` (up to the next ``## ``)."""
    section = markdown.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.DOTALL)


def tour_steps() -> list[TourStep]:
    blocks = code_blocks(README.read_text(), "## Quick tour")
    assert len(blocks) == 1, "the quick tour is one ```sh block"
    steps = []
    for line in blocks[0].splitlines():
        if not line.strip():
            continue
        command, _, comment = line.partition("  # ")
        promised = re.search(r"\(exit ([^)]*)\)", comment)
        assert promised, f"the tour line does not say its exit code: {line!r}"
        codes = frozenset(int(code) for code in re.findall(r"\d+", promised.group(1)))
        steps.append(TourStep(command.strip(), codes))
    return steps


@pytest.fixture(scope="module")
def dev_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    """What ``scripts/dev run`` starts: fleetd on the simulated healthy rig with its engine."""
    tmp = tmp_path_factory.mktemp("tour")
    daemon = start_fleetd(tmp, tmp / "state", simulate="healthy")
    try:
        yield daemon
    finally:
        stop_all([daemon])


def test_the_setup_commands_stay_first_in_one_block() -> None:
    first = re.search(r"```sh\n(.*?)```", README.read_text(), re.DOTALL)
    assert first is not None
    commands = [line.split("#")[0].strip() for line in first.group(1).splitlines()]
    assert commands == ["scripts/dev run", "scripts/dev test"]


def test_ci_runs_the_readmes_test_command_after_installing_the_outside_programs() -> None:
    """``.ci/run`` runs that same test command, under ``CI=true`` (where a missing
    outside program fails instead of skipping), after installing them."""
    ci = ROOT / ".ci" / "run"
    assert os.access(ci, os.X_OK)
    lines = [line.strip() for line in ci.read_text().splitlines() if line.strip()]
    assert lines[-1] == "scripts/dev test"
    assert any(re.match(r"export CI=true\b", line) for line in lines)
    installs = " ".join(line for line in lines if "apt-get install" in line).split()
    for package in ("postgresql", "systemd", "chromium", "prometheus", "prometheus-alertmanager"):
        assert package in installs, package


def test_every_tour_command_is_run_as_written(dev_run: Fleetd) -> None:
    steps = tour_steps()
    assert len(steps) >= 5
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CMPFLEET_", "FLEETCTL_"))}
    env |= {"FLEETCTL_URL": dev_run.url, "CMPFLEET_STATE_DIR": str(dev_run.state_dir)}
    for step in steps:
        result = subprocess.run(
            ["bash", "-c", step.command],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert "Traceback" not in result.stderr, f"{step.command}\n{result.stderr}"
        assert result.returncode in step.exit_codes, (
            f"{step.command!r} exited {result.returncode}, the README says "
            f"{sorted(step.exit_codes)}\nstdout: {result.stdout[-2000:]}\nstderr: {result.stderr}"
        )
