"""The engine gets no descriptor of fleetd's: every one beyond stdio is closed at the spawn.

An inheritable socket and an inheritable file are opened here on purpose (a library that
forgot ``O_CLOEXEC`` would leave such ones); the launched process's ``/proc/PID/fd`` must
show neither.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest

from serving.recipe.spec import LaunchMode, LaunchSpec
from serving.runtime.container_launcher import ContainerLauncher
from serving.runtime.process_launcher import ProcessLauncher
from tests.support.engine_helpers import (
    SERVED_NAME,
    FakeRuntime,
    free_port,
    kill_group,
    sim_argv,
)
from tests.support.waiting import wait_until


def _targets(pid: int) -> dict[int, str]:
    found: dict[int, str] = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
    return found


def test_an_inheritable_socket_and_file_stay_out_of_the_engine(tmp_path: Path) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.set_inheritable(True)
    kept = (tmp_path / "store.db").open("wb")
    os.set_inheritable(kept.fileno(), True)
    ready = tmp_path / "ready"
    spec = LaunchSpec(
        mode=LaunchMode.PROCESS,
        argv=(
            sys.executable,
            "-c",
            # The mark is renamed into place once closed: a touch of ``ready`` itself showed
            # its descriptor open (fd 3) to a look between the file's creation and close.
            f"import pathlib, signal; mark = pathlib.Path({str(ready)!r} + '.new'); "
            f"mark.touch(); mark.rename({str(ready)!r}); signal.pause()",
        ),
        env={},
        host="127.0.0.1",
        port=free_port(),
        served_model_name="x",
    )
    launcher = ProcessLauncher(tmp_path / "state")
    handle = launcher.start(spec)
    try:
        wait_until(ready.exists, 20, "the engine running")
        ours = _targets(os.getpid())
        theirs = _targets(handle.pid)
        leaked = {
            fd: target
            for fd, target in theirs.items()
            if fd > 2 and target in {ours[listener.fileno()], ours[kept.fileno()]}
        }
        assert not leaked, f"fleetd's descriptors open in the engine: {leaked}"
        assert sorted(theirs) == [0, 1, 2], theirs  # stdin, stdout and stderr, nothing else
        assert theirs[1] == theirs[2] == str(launcher.log_path)
    finally:
        kill_group(handle.pid)
        launcher.release(handle)
        listener.close()
        kept.close()


def test_the_container_runtimes_cli_inherits_nothing_of_fleetds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docker/podman: every CLI call (run, logs --follow, wait, ...) starts with stdio only."""
    runtime = FakeRuntime(tmp_path, monkeypatch)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.set_inheritable(True)
    ours = os.readlink(f"/proc/self/fd/{listener.fileno()}")
    port = free_port()
    spec = LaunchSpec(
        mode=LaunchMode.DOCKER,
        argv=("docker", "run", "--name", "fd-test", "sim-image", *sim_argv(port)),
        env={},
        host="127.0.0.1",
        port=port,
        served_model_name=SERVED_NAME,
        container_name="fd-test",
    )
    launcher = ContainerLauncher(tmp_path / "state", "docker")
    handle = launcher.start(spec)
    record = runtime.state / "inherited.jsonl"
    try:
        wait_until(
            lambda: {"run", "logs", "wait"} <= {json.loads(line)[0] for line in _lines(record)},
            20,
            "the runtime's run, logs and wait calls",
        )
        calls = [json.loads(line) for line in _lines(record)]
        leaked = [(command, found) for command, found in calls if ours in found]
        assert not leaked, f"fleetd's socket open in the runtime's CLI: {leaked}"
    finally:
        launcher.kill(handle)
        launcher.release(handle)
        runtime.cleanup()
        listener.close()


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
