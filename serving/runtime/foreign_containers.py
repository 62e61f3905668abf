"""The real ``ContainerProbe``: the ``docker`` and ``podman`` CLIs found on ``PATH``.

A process inside a container shows its container's 64-hex id in ``/proc/<pid>/cgroup``
(``docker-<id>.scope``, ``/docker/<id>``, ``libpod-<id>.scope``); ``ps`` maps the id to
the name and image people know. A published port is held on the host by the runtime's
proxy (``docker-proxy``, ``rootlessport``), not by the container's own process, so the
port's container is found from ``ps``'s port column instead. Only ``stop`` changes
anything, and only for ``--stop-foreign``: ``kill --signal SIGINT`` (vLLM's graceful
stop), a wait, ``kill --signal SIGTERM``, a wait, each wait watched with ``inspect``. Never
``stop --time N``: after N seconds the runtime sends SIGKILL itself, the ``kill -9`` of GPU
workers whose stranded CUDA contexts only a reboot clears (a vLLM with a wedged rank can
take longer than any N to stop). A container that outlives both is left running, refused.

It also reads what build a launch ran (``serving.runtime.provenance``): the image a
container runs (``inspect --format {{.Image}}``), that image's ``image inspect``, and the
output of ``[serving] provenance_command`` for a bare process (an argv list with a
timeout, never a shell).
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from serving.runtime.foreign import (
    STOP_SIGNALS,
    ContainerRef,
    StopOutcome,
    kill_command,
    still_running,
)

_LOG = logging.getLogger(__name__)

PS_FORMAT = "{{.ID}}\t{{.Names}}\t{{.Image}}\t{{.Ports}}"
_CONTAINER_ID_RE = re.compile(r"([0-9a-f]{64})")
_PUBLISHED_RE = re.compile(r":(\d+)->")
CLI_TIMEOUT_S = 15.0
# How often a container being stopped is inspected.
STOP_POLL_S = 0.5
RUNNING_FORMAT = "{{.State.Running}}"


class RuntimeContainers:
    """``ContainerProbe`` over the container runtimes installed here."""

    def __init__(
        self,
        runtimes: Sequence[str] = ("docker", "podman"),
        *,
        proc_root: Path = Path("/proc"),
        which: Callable[[str], str | None] = shutil.which,
        timeout_s: float = CLI_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._runtimes = tuple(runtimes)
        self._proc_root = proc_root
        self._which = which
        self._timeout_s = timeout_s
        self._clock = clock
        self._sleep = sleep

    def _run(self, argv: list[str], timeout_s: float) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            _LOG.warning("`%s` failed: %s", " ".join(argv[:3]), exc)
            return None

    def _running(self) -> list[tuple[ContainerRef, str]]:
        """Every running container of every runtime here, with its ports column."""
        found: list[tuple[ContainerRef, str]] = []
        for runtime in self._runtimes:
            binary = self._which(runtime)
            if binary is None:
                continue
            result = self._run([binary, "ps", "--no-trunc", "--format", PS_FORMAT], self._timeout_s)
            if result is None or result.returncode != 0:
                continue
            for line in result.stdout.splitlines():
                fields = line.split("\t")
                if len(fields) < 3 or not fields[0]:
                    continue
                ports = fields[3] if len(fields) > 3 else ""
                found.append((ContainerRef(runtime, fields[0], fields[1], fields[2]), ports))
        return found

    def _cgroup_id(self, pid: int) -> str | None:
        try:
            text = (self._proc_root / str(pid) / "cgroup").read_text()
        except OSError:
            return None
        match = _CONTAINER_ID_RE.search(text)
        return None if match is None else match.group(1)

    def container_of_pid(self, pid: int) -> ContainerRef | None:
        """The running container whose cgroup holds ``pid``."""
        container_id = self._cgroup_id(pid)
        if container_id is None:
            return None
        for ref, _ in self._running():
            if ref.container_id.startswith(container_id) or container_id.startswith(
                ref.container_id
            ):
                return ref
        return None

    def container_publishing(self, port: int) -> ContainerRef | None:
        """A running container whose ports column publishes host ``port``."""
        for ref, ports in self._running():
            if any(int(found) == port for found in _PUBLISHED_RE.findall(ports)):
                return ref
        return None

    def image_of_container(self, runtime: str, name: str) -> str | None:
        """The ID of the image container ``name`` runs (the tag may point elsewhere now)."""
        binary = self._which(runtime)
        if binary is None:
            return None
        argv = [binary, "inspect", "--type", "container", "--format", "{{.Image}}", name]
        result = self._run(argv, self._timeout_s)
        if result is None or result.returncode != 0:
            return None
        return result.stdout.strip() or None

    def inspect_image(self, runtime: str, image: str) -> str | None:
        """``<runtime> image inspect IMAGE``'s JSON text (``None``: no runtime or no image)."""
        binary = self._which(runtime)
        if binary is None:
            return None
        result = self._run([binary, "image", "inspect", image], self._timeout_s)
        if result is None or result.returncode != 0:
            return None
        return result.stdout

    def command_output(self, argv: Sequence[str], timeout_s: float) -> tuple[bool, str]:
        """Run ``argv`` (no shell) for its output: ``(True, stdout)``, or ``(False, why)``."""
        if not argv:
            return False, "no command"
        result = self._run(list(argv), timeout_s)
        if result is None:
            return False, f"`{argv[0]}` did not run or took longer than {timeout_s:g} s"
        if result.returncode != 0:
            lines = result.stderr.strip().splitlines()
            return False, f"`{argv[0]}` exited {result.returncode}: {lines[-1] if lines else ''}"
        return True, result.stdout

    def _state(self, binary: str, name: str) -> str | None:
        """``inspect``: "running", "stopped", "gone" (no such container), None: no answer."""
        result = self._run([binary, "inspect", "--format", RUNNING_FORMAT, name], self._timeout_s)
        if result is None:
            return None
        if result.returncode != 0:
            return "gone" if "no such" in result.stderr.lower() else None
        return "running" if result.stdout.strip().lower() == "true" else "stopped"

    def _stopped_within(self, binary: str, name: str, grace_s: float) -> bool:
        """Inspect until the container stops (or is removed) or ``grace_s`` has passed."""
        deadline = self._clock() + grace_s
        while True:
            if self._state(binary, name) in ("stopped", "gone"):
                return True
            if self._clock() >= deadline:
                return False
            self._sleep(min(STOP_POLL_S, max(0.0, deadline - self._clock())))

    def stop(self, container: ContainerRef, timeout_s: float) -> StopOutcome:
        """SIGINT, wait, SIGTERM, wait (``kill --signal``, ``inspect``); never SIGKILL."""
        binary = self._which(container.runtime) or container.runtime
        sent: list[str] = []
        commands: list[tuple[str, ...]] = []
        for signal_name in STOP_SIGNALS:
            argv = list(kill_command(binary, signal_name, container.name))
            commands.append(kill_command(container.runtime, signal_name, container.name))
            result = self._run(argv, self._timeout_s)
            if result is None:
                return StopOutcome(container, tuple(commands), False, "the runtime did not answer")
            if result.returncode != 0 and self._state(binary, container.name) != "stopped":
                lines = result.stderr.strip().splitlines()
                detail = lines[-1] if lines else f"exit {result.returncode}"
                return StopOutcome(container, tuple(commands), False, detail)
            sent.append(signal_name)
            if self._stopped_within(binary, container.name, timeout_s):
                return StopOutcome(container, tuple(commands), True)
        return StopOutcome(container, tuple(commands), False, still_running(sent, timeout_s))
