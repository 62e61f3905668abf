"""fleetctl imports only what a command uses: ``--version``, ``--help`` and ``status``.

The speed itself is a bench (``bench/cli_startup.py``), never a timed test; what is held
here is the cause of speed: which modules a command loads (``python -X importtime`` lists
every import). httpx, rich, pydantic and the daemon's config cost 50 to 300 ms each on a
busy 2-core box, more than the 150 ms a monitor's ``fleetctl status`` may take.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.jsonpeer import json_peer

HEAVY = ("httpx", "rich", "pydantic", "daemon.config", "hwcheck.model", "serving")
STATUS = {
    "overall": "warning",
    "cards": [],
    "checks": [
        {"id": "power_cap", "card": 0, "severity": "warning", "message": "250 W",
         "remedy": "fleetctl caps apply"},
    ],
    "serving": {"state": "stopped"},
    "recovery": {"reboot_required": False},
}  # fmt: skip


def imported(*args: str) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """The modules ``fleetctl ARGS`` imports (stdout a pipe), and how it ended."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "daemon.fleetctl", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("FLEETCTL_")},
    )
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return names, done


def heavy(names: set[str], *extra: str) -> list[str]:
    return sorted(
        n for n in names if any(n == h or n.startswith(h + ".") for h in (*HEAVY, *extra))
    )


def test_version_loads_neither_the_command_tree_nor_a_library() -> None:
    names, done = imported("--version")
    assert done.returncode == 0 and done.stdout.startswith("fleetctl ")
    assert heavy(names, "typer", "daemon.cli.app") == []


def test_help_loads_the_command_tree_only() -> None:
    names, done = imported("--help")
    assert done.returncode == 0 and "Commands:" in done.stdout
    assert "daemon.cli.app" in names  # it did build the tree (the check can fail)
    assert heavy(names) == []


@pytest.fixture
def fleetd_url() -> Iterator[str]:
    with json_peer(STATUS) as server:
        yield server.url


def test_status_into_a_pipe_loads_no_command_tree_and_no_library(fleetd_url: str) -> None:
    names, done = imported("--url", fleetd_url, "status")
    assert done.returncode == 1, done.stderr  # WARNING: the document was read and judged
    assert done.stdout.startswith("overall: WARNING\n")
    assert "fix: fleetctl caps apply" in done.stdout
    assert heavy(names, "typer", "daemon.cli.app") == []


def test_status_with_an_option_the_fast_path_does_not_know_goes_through_typer(
    fleetd_url: str,
) -> None:
    names, done = imported("--url", fleetd_url, "status", "--only", "0")
    assert done.returncode == 1, done.stderr
    assert "typer" in names  # the same answer, by the command tree
    assert done.stdout.startswith("overall: WARNING\n")
