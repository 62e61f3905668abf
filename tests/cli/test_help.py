"""``fleetctl ... --help`` as a person reads it: flags look like flags, values show their type."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest
import typer

from daemon.cli.app import app
from tests.support.cli import EXIT_OUTPUT_CLOSED, fleetctl_into_closed_pipe, run_fleetctl
from web.version import __version__


def command_paths() -> list[list[str]]:
    """Every command and group of fleetctl, read from the command tree itself."""
    paths: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:
        paths.append(path)
        if isinstance(command, typer.core.TyperGroup):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return paths


COMMANDS = command_paths()


def test_the_tree_is_read() -> None:
    assert ["xid", "scan"] in COMMANDS and ["logs"] in COMMANDS and [] in COMMANDS


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "fleetctl")
def test_help_shows_no_value_placeholder_on_flags(path: list[str]) -> None:
    result = run_fleetctl(*path, "--help")
    assert result.returncode == 0, result.stderr
    assert "--help" in result.stdout
    assert "<bool>" not in result.stdout
    help_line = next(line for line in result.stdout.splitlines() if "--help" in line)
    assert re.match(r"^\s*-h, --help\s+Show this message", help_line), help_line
    short = run_fleetctl(*path, "-h")  # CONTRACT: fleetctl -h, on every command too
    assert short.returncode == 0 and short.stdout == result.stdout, short.stderr


def test_options_that_take_a_value_still_say_which() -> None:
    shown = run_fleetctl("logs", "--help").stdout
    assert re.search(r"--lines <int", shown), shown
    assert re.search(r"^\s*-f, --follow\s+Keep printing", shown, re.MULTILINE), shown


def test_help_into_a_closed_pipe_is_quiet() -> None:
    for path in ([], ["check"]):
        result = fleetctl_into_closed_pipe(*path, "--help")
        assert result.stderr == ""
        assert result.returncode == EXIT_OUTPUT_CLOSED


def test_both_programs_say_their_version() -> None:
    fleetctl = run_fleetctl("--version")
    assert (fleetctl.returncode, fleetctl.stdout) == (0, f"fleetctl {__version__}\n")
    as_json = run_fleetctl("--json", "--version")
    assert json.loads(as_json.stdout)["version"] == __version__
    later = run_fleetctl("--url", "http://127.0.0.1:1", "--version")  # after other options
    assert (later.returncode, later.stdout) == (0, f"fleetctl {__version__}\n")
    said = {}
    for flag in ("--version", "-h"):
        fleetd = subprocess.run(
            [sys.executable, "-m", "daemon.fleetd", flag],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert fleetd.returncode == 0, fleetd.stderr
        said[flag] = fleetd.stdout
    assert said["--version"] == f"fleetd {__version__}\n"
    assert said["-h"].startswith("usage: fleetd")
