"""``fleetctl ... --help`` as a person reads it: flags look like flags, values show their type."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

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


def help_text(path: list[str], flag: str) -> str:
    """``fleetctl PATH FLAG`` run in this process: the same command tree, no interpreter start.

    Every command's help is read here (two flags each); the program itself, as a separate
    process, is exercised by the tests below and by the rest of tests/cli.
    """
    result = CliRunner().invoke(app, [*path, flag], prog_name="fleetctl")
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "fleetctl")
def test_help_shows_no_value_placeholder_on_flags(path: list[str]) -> None:
    shown = help_text(path, "--help")
    assert "--help" in shown
    assert "<bool>" not in shown
    help_line = next(line for line in shown.splitlines() if "--help" in line)
    assert re.match(r"^\s*-h, --help\s+Show this message", help_line), help_line
    assert help_text(path, "-h") == shown  # docs/reference.md: fleetctl -h, on every command too


def test_the_program_itself_answers_help_and_h_alike() -> None:
    for path in ([], ["xid", "scan"]):
        result = run_fleetctl(*path, "--help")
        assert result.returncode == 0 and "Show this message" in result.stdout, result.stderr
        short = run_fleetctl(*path, "-h")
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
