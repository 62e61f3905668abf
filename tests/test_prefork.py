"""The suite's launcher (``tests/support/prefork``) gives what a fresh interpreter gives.

Most end-to-end tests start fleetd and fleetctl as forks of one process that imported
them once (issue 38: the suite's CPU). These hold the launcher to the real thing, side by
side with ``python -m`` of the same probe: descriptors, environment, directory, umask,
argv, signal dispositions, streams, exit codes, tracebacks, threads joined at the exit,
and a death by signal.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import prefork

ROOT = Path(__file__).resolve().parents[1]
PROBE = "tests.support.prefork_probe"


def fresh(*args: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", PROBE, *args],
        capture_output=True,
        text=True,
        input=stdin,
        env=env,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def forked(*args: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return prefork.run(PROBE, list(args), env=env, stdin=stdin, cwd=str(ROOT))


def test_a_forked_process_sees_itself_as_a_fresh_interpreter_does() -> None:
    env = {**os.environ, "CMPFLEET_PROBE": "only in this request"}
    real = fresh("one", "two", env=env, stdin="given")
    fork = forked("one", "two", env=env, stdin="given")
    assert (fork.returncode, fork.stderr) == (real.returncode, real.stderr) == (0, "to stderr\n")
    seen, expected = json.loads(fork.stdout), json.loads(real.stdout)
    assert seen == expected
    assert seen["fds"] == [0, 1, 2]  # the launcher's socket and pipes are not inherited
    assert seen["env"] == env and seen["argv"] == ["one", "two"] and seen["stdin"] == "given"


def test_the_umask_asked_for_is_the_childs() -> None:
    fork = prefork.run(PROBE, [], env=dict(os.environ), cwd=str(ROOT), umask=0o027)
    assert json.loads(fork.stdout)["umask"] == 0o027


@pytest.mark.parametrize(
    ("args", "code", "in_stderr"),
    [
        (("exit", "3"), 3, "to stderr\n"),
        (("raise",), 1, "RuntimeError: raised on purpose"),
    ],
)
def test_exit_codes_and_tracebacks_are_the_interpreters(
    args: tuple[str, ...], code: int, in_stderr: str
) -> None:
    env = dict(os.environ)
    real, fork = fresh(*args, env=env), forked(*args, env=env)
    assert real.returncode == fork.returncode == code
    assert in_stderr in real.stderr and in_stderr in fork.stderr
    assert ("Traceback" in real.stderr) == ("Traceback" in fork.stderr)


def test_the_exit_waits_for_a_thread_still_running() -> None:
    env = dict(os.environ)
    for done in (fresh("thread", env=env), forked("thread", env=env)):
        assert done.returncode == 0 and done.stdout.endswith("thread done\n"), done


def test_a_signal_ends_it_as_popen_reports_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with out.open("wb") as file:
        child = prefork.start(
            ["sleep"],
            env=dict(os.environ),
            stdout=file.fileno(),
            stderr=file.fileno(),
            program=PROBE,
        )
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(0.2)
    assert child.poll() is None
    child.send_signal(signal.SIGKILL)
    assert child.wait(30) == -signal.SIGKILL
    child.send_signal(signal.SIGTERM)  # ended: nothing is sent, as Popen does
