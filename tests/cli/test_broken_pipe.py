"""``fleetctl ... | head``: a reader that leaves early ends fleetctl quietly, with 141.

Two kinds of real pipe: one whose read end is closed before fleetctl writes anything
(every write fails, whatever the timing), and a real ``head -1`` reading the first line
of an output far larger than a pipe holds (the later writes fail).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import EXIT_OUTPUT_CLOSED, fleetctl_into_closed_pipe, run_fleetctl
from tests.support.fleetd import Fleetd, start_fleetd, stop_all

XID_LINES = 3_000  # several times what a 64 KiB pipe holds


def fleetctl_into_head(*args: str) -> tuple[int, str, str]:
    """``fleetctl ARGS | head -1``: fleetctl's exit code and stderr, and what head printed.

    Without ``PYTHONUNBUFFERED``, as a shell user runs it: unbuffered, CPython's text layer
    drops the rest of a write the reader cut short without an error (the output is lost
    quietly either way, but then fleetctl cannot tell and exits 0).
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with subprocess.Popen(
        [sys.executable, "-m", "daemon.fleetctl", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    ) as producer:
        assert producer.stdout is not None and producer.stderr is not None
        head = subprocess.run(
            ["head", "-1"], stdin=producer.stdout, capture_output=True, text=True, check=False
        )
        producer.stdout.close()  # only head reads it, as in a shell pipeline
        err = producer.stderr.read().decode()
        code = producer.wait(timeout=120)
    return code, err, head.stdout


def assert_quiet_exit(result: subprocess.CompletedProcess[str]) -> None:
    assert result.stderr == "", result.stderr
    assert result.returncode == EXIT_OUTPUT_CLOSED


@pytest.fixture(scope="module")
def xid_storm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("storm") / "kern.log"
    with path.open("w") as log:
        for n in range(XID_LINES):
            log.write(
                f"[{10 + n * 0.001:12.6f}] NVRM: Xid (PCI:0000:01:00): 31, pid={n}, "
                "name=python3, Ch 00000008, intr 00000000. MMU Fault\n"
            )
    return path


@pytest.fixture(scope="module")
def fleetd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("fleetd")
    daemon = start_fleetd(tmp, tmp / "state")
    try:
        yield daemon
    finally:
        stop_all([daemon])


@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["human", "json"])
def test_check_into_a_closed_pipe(json_flag: list[str]) -> None:
    assert_quiet_exit(fleetctl_into_closed_pipe("check", "--simulate", "power-brake", *json_flag))


@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["human", "json"])
def test_xid_scan_of_a_storm_into_head(xid_storm: Path, json_flag: list[str]) -> None:
    code, err, first = fleetctl_into_head("xid", "scan", str(xid_storm), *json_flag)
    assert first.strip(), "head saw no output at all"
    assert err == ""
    assert code == EXIT_OUTPUT_CLOSED


@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["human", "json"])
@pytest.mark.parametrize("command", [["status"], ["events"], ["logs", "--lines", "5"]])
def test_daemon_commands_into_a_closed_pipe(
    fleetd: Fleetd, command: list[str], json_flag: list[str]
) -> None:
    argv = ["--url", fleetd.url, *command, *json_flag]
    env = {"CMPFLEET_STATE_DIR": str(fleetd.state_dir)}  # the token (the engine log needs it)
    shown = run_fleetctl(*argv, env=env)
    assert shown.stdout.strip(), f"{command} printed nothing to lose: {shown.stderr}"
    assert_quiet_exit(fleetctl_into_closed_pipe(*argv, env=env))


def test_errors_still_reach_stderr_when_stdout_is_closed() -> None:
    result = fleetctl_into_closed_pipe("check", "--simulate", "no-such-scenario")
    assert result.returncode == 3
    assert result.stderr.startswith("fleetctl: ")
    assert "Traceback" not in result.stderr
