"""Helpers for the engine tests: specs for the simulated engine, event capture, cleanup.

Everything here is real: free loopback ports, the simulated engine as a child process of
``sys.executable``, psutil for "is it still running". Waiting is always on a condition
with a deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import psutil
import pytest

from serving.recipe.spec import LaunchMode, LaunchSpec
from serving.runtime.states import ServingChange, ServingEvent, ServingState
from tests.support.fleetd import free_port

SERVED_NAME = "sim-model"
FAKE_DOCKER_SOURCE = Path(__file__).with_name("fake_docker_script.py")


def sim_argv(port: int, *flags: str, ready_after_s: float = 0.3) -> tuple[str, ...]:
    """``python -m serving.sim.engine serve`` with the flags a real preset would carry."""
    return (
        sys.executable,
        "-m",
        "serving.sim.engine",
        "serve",
        "/models/sim",
        "--pipeline-parallel-size",
        "4",
        "--kv-cache-dtype",
        "fp8",
        "--trust-remote-code",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        SERVED_NAME,
        "--sim-ready-after-s",
        str(ready_after_s),
        *flags,
    )


def sim_spec(port: int, *flags: str, ready_after_s: float = 0.3) -> LaunchSpec:
    """A process-mode spec for the simulated engine."""
    return LaunchSpec(
        mode=LaunchMode.PROCESS,
        argv=sim_argv(port, *flags, ready_after_s=ready_after_s),
        env={"CMPFLEET_TEST_ENGINE": "1"},
        host="127.0.0.1",
        port=port,
        served_model_name=SERVED_NAME,
        recipe_hash="test-recipe",
    )


class SpecSequence:
    """A spec factory that gives the n-th *launch* the n-th spec (the last one repeats).

    The supervisor also builds specs when it is not launching (adoption, comparing an
    adopted engine with the recipe), so the position follows launches seen in the events.
    """

    def __init__(self, specs: Iterable[LaunchSpec]) -> None:
        self._specs = list(specs)
        self.events: EventLog | None = None

    def __call__(self) -> LaunchSpec:
        launched = 0 if self.events is None else len(self.events.launch_pids())
        return self._specs[min(launched, len(self._specs) - 1)]


class EventLog:
    """Collects supervisor events; tests wait on it with a deadline."""

    def __init__(self) -> None:
        self._events: list[ServingEvent] = []
        self._changed = threading.Condition()

    def __call__(self, event: ServingEvent) -> None:
        with self._changed:
            self._events.append(event)
            self._changed.notify_all()

    @property
    def events(self) -> list[ServingEvent]:
        with self._changed:
            return list(self._events)

    def of(self, kind: ServingChange) -> list[ServingEvent]:
        return [e for e in self.events if e.kind is kind]

    def states(self) -> list[ServingState]:
        """States entered, in order (from STATE events)."""
        return [e.state for e in self.of(ServingChange.STATE)]

    def launch_pids(self) -> list[int]:
        pids: list[int] = []
        for event in self.of(ServingChange.LAUNCH):
            if event.launch is not None and event.launch.pid not in pids:
                pids.append(event.launch.pid)
        return pids

    def wait_for(
        self, predicate: Callable[[list[ServingEvent]], bool], timeout_s: float, what: str
    ) -> list[ServingEvent]:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not predicate(self._events):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    seen = "; ".join(f"{e.kind}:{e.message}" for e in self._events[-12:])
                    raise AssertionError(f"timed out waiting for {what}; last events: {seen}")
                self._changed.wait(remaining)
            return list(self._events)

    def wait_state(self, state: ServingState, timeout_s: float, after: int = 0) -> ServingEvent:
        """The first STATE event into ``state`` among events[after:]."""
        events = self.wait_for(
            lambda evs: any(
                e.kind is ServingChange.STATE and e.state is state for e in evs[after:]
            ),
            timeout_s,
            f"state {state}",
        )
        return next(e for e in events[after:] if e.kind is ServingChange.STATE and e.state is state)

    def count(self) -> int:
        with self._changed:
            return len(self._events)


def is_running(pid: int) -> bool:
    """True for a live, non-zombie process."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def kill_group(pid: int) -> None:
    """Test clean-up (tests may kill; the product must not): SIGKILL a process group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
    # Reap our own zombie children so they do not linger in the process table.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def install_fake_docker(tmp_path: Path, runtime: str = "docker") -> tuple[Path, Path]:
    """Write the fake runtime CLI into ``tmp_path/bin``; returns (bin dir, state dir)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    state_dir = tmp_path / "fake-docker"
    state_dir.mkdir(exist_ok=True)
    script = bin_dir / runtime
    script.write_text(f"#!{sys.executable}\n" + FAKE_DOCKER_SOURCE.read_text())
    script.chmod(0o755)
    return bin_dir, state_dir


class FakeRuntime:
    """The fake docker on PATH, its recorded calls, and cleanup of its containers."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bin_dir, self.state = install_fake_docker(tmp_path)
        monkeypatch.setenv("PATH", f"{self.bin_dir}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("FAKE_DOCKER_STATE", str(self.state))
        monkeypatch.setenv("FAKE_DOCKER_IMAGE", "sim-image")

    def calls(self) -> list[list[str]]:
        path = self.state / "calls.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def container(self, name: str) -> dict[str, object]:
        data: dict[str, object] = json.loads((self.state / f"container-{name}.json").read_text())
        return data

    def cleanup(self) -> None:
        for path in self.state.glob("container-*.json"):
            pid = json.loads(path.read_text()).get("pid")
            if pid:
                kill_group(int(pid))


@contextlib.contextmanager
def running_sim_engine(*flags: str) -> Iterator[str]:
    """The simulated engine as a child process, ready at once; yields its base URL."""
    import subprocess

    import httpx

    from tests.support.waiting import wait_until

    port = free_port()
    child = subprocess.Popen(
        sim_argv(port, *flags, ready_after_s=0.0), stdout=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            try:
                return httpx.get(f"{url}/health", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, 30, "the simulated engine to answer /health")
        yield url
    finally:
        kill_group(child.pid)
        child.wait(timeout=5)
