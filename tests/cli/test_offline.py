"""fleetctl with no daemon: monitoring exit codes and a JSON document scripts can read."""

from __future__ import annotations

import json
import socket

import pytest

from tests.support.cli import run_fleetctl, run_fleetctl_here


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends


def test_status_of_an_unreachable_daemon_is_unknown() -> None:
    """The real process: the exit code a monitor reads (the tests below run fleetctl's main
    in this process, which exits with the same codes)."""
    url = f"http://127.0.0.1:{closed_port()}"
    human = run_fleetctl("--url", url, "status")
    assert human.returncode == 3
    assert human.stdout == ""
    assert human.stderr.startswith(f"fleetctl: cannot reach fleetd at {url}")
    scripted = run_fleetctl("--url", url, "status", "--json")
    assert scripted.returncode == 3
    assert json.loads(scripted.stdout)["overall"] == "unknown"


def test_other_commands_fail_with_one_line() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    for args in (["events"], ["ack", "1"], ["start", "--no-wait"], ["logs"]):
        result = run_fleetctl_here("--url", url, *args)
        assert result.returncode == 1, args
        assert len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)


def test_usage_errors_are_one_line_and_unknown_for_monitoring_commands() -> None:
    for args, code in ((["status", "--bogus"], 3), (["check", "--bogus"], 3), (["ack", "abc"], 2)):
        result = run_fleetctl_here(*args)
        assert result.returncode == code, args
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("fleetctl: ")


def test_usage_errors_under_json_still_print_one_document() -> None:
    for args in (["--json", "status", "--bogus"], ["check", "--bogus", "--json"]):
        result = run_fleetctl_here(*args)
        assert result.returncode == 3, args
        assert json.loads(result.stdout)["overall"] == "unknown"
        assert "No such option: --bogus" in json.loads(result.stdout)["error"]
    result = run_fleetctl_here("events", "--limit", "0", "--json")
    assert result.returncode == 2
    assert json.loads(result.stdout)["exit_code"] == 2
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("group", [[], ["canary"], ["xid"], ["recipe"], ["fleet"], ["caps"]])
def test_a_group_without_its_command_shows_its_help_and_exits_2(group: list[str]) -> None:
    shown = run_fleetctl_here(*group)
    assert shown.returncode == 2
    assert shown.stdout == ""
    assert shown.stderr.startswith(f"Usage: {' '.join(['fleetctl', *group])} [OPTIONS] COMMAND")
    scripted = run_fleetctl_here("--json", *group)
    assert scripted.returncode == 2
    document = json.loads(scripted.stdout)
    assert document["exit_code"] == 2
    assert "command" in document["error"].lower()  # "needs a command" / "Missing command."
    assert len(scripted.stderr.strip().splitlines()) == 1
