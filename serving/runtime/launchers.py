"""The launcher protocol, its errors and what both launchers share.

Two launchers implement :class:`Launcher`: :class:`serving.runtime.process_launcher.ProcessLauncher`
runs ``spec.argv`` as a bare process, :class:`serving.runtime.container_launcher.ContainerLauncher`
as a ``docker``/``podman`` container. They are the only modules that spawn processes.

The engine must outlive fleetd (a cold start costs 20 to 45 minutes), so nothing ties it
to fleetd: it runs in its own session and process group, nothing asks the kernel to kill it
when fleetd dies, and its output goes straight into ``engine.log`` in the state dir (a pipe
would die with fleetd). An adoption record, ``engine.pid`` (JSON: pid, the process's start
time, argv, spec hash, port, mode, container name), lets a restarted fleetd find the engine
again; the start time guards against a reused pid. A container is found by its name and id.

Stopping follows vLLM: SIGINT is its graceful stop signal, SIGTERM the firmer one. SIGKILL
exists here (:meth:`Launcher.kill`) but the supervisor only calls it when ``allow_kill`` is
configured: killed multi-GPU workers strand CUDA contexts that only a reboot clears.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from serving.recipe.masking import secret_values
from serving.recipe.spec import LaunchSpec
from serving.runtime.engine_record import (
    EngineRecord,
    RecordFile,
)

_LOG = logging.getLogger(__name__)


class LaunchError(Exception):
    """The engine could not be started; the message says why in one line."""


class LauncherError(Exception):
    """A launcher operation (inspect, signal) failed; the message says which and why."""


class EngineDrifted(Exception):
    """An engine runs under the recipe's name but was launched from another recipe.

    Raised by ``adopt_running`` for a container whose ``cmpfleet.recipe-hash`` label is
    not the spec's: adopting it would pass another launch off as the active profile's.
    """

    def __init__(
        self, pid: int, container_name: str | None, recipe_hash: str, base_url: str
    ) -> None:
        super().__init__(f"{container_name or pid} runs recipe {recipe_hash or '(no label)'}")
        self.pid = pid
        self.container_name = container_name
        self.recipe_hash = recipe_hash
        self.base_url = base_url


@dataclass(frozen=True)
class EngineHandle:
    """One running (or ended) engine as a launcher knows it.

    ``adopted`` is true when this fleetd did not start it: its exit code is then unknown.
    """

    key: str
    record: EngineRecord
    adopted: bool

    @property
    def pid(self) -> int:
        """The engine's process id (for a container, its main process on the host)."""
        return self.record.pid


class Launcher(Protocol):
    """What the supervisor needs from a way of running the engine."""

    @property
    def log_path(self) -> Path:
        """The file the engine's output lands in (the supervisor tails it)."""
        ...

    def read_record(self) -> EngineRecord | None:
        """The adoption record, ``None`` if there is none; :class:`RecordError` if unusable."""
        ...

    def start(self, spec: LaunchSpec) -> EngineHandle:
        """Launch ``spec``; raises :class:`LaunchError` with a one-line reason."""
        ...

    def adopt(self, record: EngineRecord) -> EngineHandle | None:
        """The engine ``record`` describes if it still runs as that very process, else None."""
        ...

    def adopt_running(self, spec: LaunchSpec) -> EngineHandle | None:
        """An engine for ``spec`` found running without a record (containers, by name)."""
        ...

    def is_alive(self, handle: EngineHandle) -> bool:
        """True while the engine runs."""
        ...

    def wait(self, handle: EngineHandle, timeout_s: float) -> bool:
        """Block up to ``timeout_s`` for the engine to end; True once it has."""
        ...

    def exit_code(self, handle: EngineHandle) -> int | None:
        """Exit status once ended (negative: killed by that signal); None if unknown."""
        ...

    def signal_stop(self, handle: EngineHandle, graceful: bool) -> None:
        """Ask the engine to stop: SIGINT when ``graceful``, else SIGTERM. Never SIGKILL."""
        ...

    def kill(self, handle: EngineHandle) -> None:
        """SIGKILL the engine (only when ``allow_kill`` is configured)."""
        ...

    def survivors(self, handle: EngineHandle) -> tuple[int, ...]:
        """Processes of the engine still running after its main process ended."""
        ...

    def members(self, handle: EngineHandle) -> tuple[int, ...]:
        """The engine's live processes now, its main one included.

        Its workers and a wrapper's child: an OOM-killer record naming one ends the engine.
        """
        ...

    def release(self, handle: EngineHandle) -> None:
        """The engine has ended: drop what watched it and remove its record."""
        ...

    def detach(self, handle: EngineHandle) -> None:
        """fleetd leaves but the engine keeps running: drop watchers, keep the record."""
        ...


# fleetd's own plumbing: the engine must not talk to systemd or inherit its sockets.
_NOT_FOR_THE_ENGINE = (
    "NOTIFY_SOCKET",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
)


# fleetd's and fleetctl's own settings: ``CMPFLEET_STORE_URL`` can carry the database
# password and ``FLEETCTL_TOKEN`` the API token; an engine running a model's remote code
# (``--trust-remote-code``) must see neither.
_FLEET_PREFIXES = ("CMPFLEET_", "FLEETCTL_")


def engine_environment(spec: LaunchSpec) -> dict[str, str]:
    """fleetd's environment minus its systemd plumbing and its own settings, plus the recipe's.

    The recipe's ``env`` is added last, so a variable a recipe names on purpose still
    reaches the engine, whatever its name.
    """
    base = {
        name: value
        for name, value in os.environ.items()
        if name not in _NOT_FOR_THE_ENGINE and not name.startswith(_FLEET_PREFIXES)
    }
    return {**base, **spec.env}


def launch_secrets(spec: LaunchSpec) -> frozenset[str]:
    """The secret values one launch hands the engine (its flags and whole environment).

    The engine may echo any of them into its log (vLLM prints its arguments), so the log
    capture masks them all, the inherited environment's (an ``HF_TOKEN`` in fleetd's own)
    included.
    """
    return secret_values(spec.argv, engine_environment(spec))


def open_log_or_refuse(files: RecordFile) -> int:
    """Open ``engine.log`` before anything is spawned; a disk problem is a refusal."""
    try:
        return files.open_log()
    except OSError as exc:
        raise LaunchError(f"cannot open {files.log_path}: {exc.strerror or exc}") from exc


def write_record_keeping_engine(files: RecordFile, record: EngineRecord) -> None:
    """Write ``engine.pid``; a failure is logged, never turned into a lost engine.

    The engine already runs: raising here would leave it unsupervised. Without the
    record only adoption after a fleetd restart is lost, so that is what is said.
    """
    try:
        files.write(record)
    except OSError as exc:
        _LOG.error(
            "engine pid %s runs but %s could not be written (%s): a restarted fleetd "
            "will not adopt it",
            record.pid,
            files.record_path,
            exc.strerror or exc,
        )


def last_line(text: str) -> str:
    """The last non-blank line of a command's output (its error, usually)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""
