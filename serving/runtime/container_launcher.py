"""The ``docker``/``podman`` launcher: the engine as a named container.

Stopping sends signals with ``kill --signal``: INT (vLLM's graceful stop), then TERM. The
runtime's own ``stop -t N`` escalates to SIGKILL after N seconds, which only ``allow_kill``
may do: it is therefore the last step, ``kill()``, and never the first.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from hwcheck.threads import ServiceThread, run_in_thread
from serving.recipe.build import RECIPE_HASH_LABEL
from serving.recipe.spec import LaunchMode, LaunchSpec
from serving.runtime.engine_record import (
    EngineRecord,
    RecordFile,
    now_iso,
    process_start_time,
    record_for,
)
from serving.runtime.launchers import (
    EngineDrifted,
    EngineHandle,
    LauncherError,
    LaunchError,
    engine_environment,
    last_line,
    open_log_or_refuse,
    write_record_keeping_engine,
)

_LOG = logging.getLogger(__name__)

_INSPECT_FORMAT = (
    "{{.Id}} {{.State.Running}} {{.State.ExitCode}} {{.State.Pid}} {{.State.OOMKilled}}"
)


@dataclass(frozen=True)
class ContainerState:
    """One ``inspect`` of a container."""

    container_id: str
    running: bool
    exit_code: int
    pid: int
    oom_killed: bool = False


def parse_inspect(output: str) -> ContainerState:
    """Parse ``inspect --format`` with ``_INSPECT_FORMAT``'s five fields."""
    fields = output.split()
    if len(fields) != 5 or fields[1] not in ("true", "false"):
        raise LauncherError(f"unexpected container inspect output: {output.strip()!r}")
    try:
        return ContainerState(
            container_id=fields[0],
            running=fields[1] == "true",
            exit_code=int(fields[2]),
            pid=int(fields[3]),
            oom_killed=fields[4] == "true",
        )
    except ValueError as exc:
        raise LauncherError(f"unexpected container inspect output: {output.strip()!r}") from exc


@dataclass
class _ContainerWatch:
    """The helper processes that follow one container: ``logs -f`` and ``wait``."""

    logs: subprocess.Popen[bytes] | None
    pump: ServiceThread | None
    waiter: subprocess.Popen[bytes] | None
    exit_code: int | None = None


STOP_KILL_AFTER_S = 5


class ContainerLauncher:
    """Runs the engine as a docker or podman container named ``spec.container_name``.

    ``spec.argv`` is the whole ``docker run ...`` line; ``--detach`` is added when missing.
    Output is followed with ``logs -f`` into ``engine.log`` and the exit with ``wait``
    (which also keeps the exit code of a ``--rm`` container). Both helpers are clients of
    the runtime, not the engine: stopping them never touches the container.

    Stopping sends signals with ``kill --signal``: INT (vLLM's graceful stop), then TERM.
    The runtime's own ``stop -t N`` escalates to SIGKILL after N seconds, which only
    ``allow_kill`` may do: it is therefore the last step, ``kill()``, and never the first.
    """

    def __init__(
        self,
        state_dir: Path,
        runtime: str = "docker",
        *,
        binary: str | None = None,
        command_timeout_s: float = 60.0,
        run_timeout_s: float = 900.0,
    ) -> None:
        if runtime not in ("docker", "podman"):
            raise ValueError(f"container runtime must be docker or podman, not {runtime!r}")
        self.runtime = runtime
        self._binary = binary or runtime
        self._files = RecordFile(state_dir)
        self._command_timeout_s = command_timeout_s
        self._run_timeout_s = run_timeout_s
        self._lock = threading.Lock()
        self._watches: dict[str, _ContainerWatch] = {}
        self._oom_noted: set[str] = set()

    @property
    def log_path(self) -> Path:
        """``engine.log`` in the state dir."""
        return self._files.log_path

    def read_record(self) -> EngineRecord | None:
        """The adoption record (see :class:`Launcher`)."""
        return self._files.read()

    # -- runtime CLI -------------------------------------------------------------------

    def _cli(
        self, args: list[str], timeout_s: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        argv = [self._binary, *args]
        try:
            return subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=timeout_s or self._command_timeout_s,
                check=False,
                stdin=subprocess.DEVNULL,
                close_fds=True,  # no descriptor of fleetd's in the runtime CLI (issue 36)
            )
        except FileNotFoundError as exc:
            raise LauncherError(
                f"{self.runtime} is not installed ({self._binary!r} not found)"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise LauncherError(
                f"`{' '.join(argv[:3])} ...` did not answer within {exc.timeout:.0f} s"
            ) from exc

    def inspect(self, name: str) -> ContainerState | None:
        """The container's state, or ``None`` when no container has that name."""
        result = self._cli(["inspect", "--type", "container", "--format", _INSPECT_FORMAT, name])
        if result.returncode != 0:
            if "no such" in result.stderr.lower():
                return None
            raise LauncherError(f"{self.runtime} inspect {name} failed: {last_line(result.stderr)}")
        return parse_inspect(result.stdout)

    # -- lifecycle -----------------------------------------------------------------------

    def start(self, spec: LaunchSpec) -> EngineHandle:
        """Remove a stopped container of the same name, run detached, follow it."""
        if spec.mode is LaunchMode.PROCESS:
            raise LaunchError("the container launcher cannot run a process-mode spec")
        name = spec.container_name
        if not name:
            raise LaunchError("a container launch needs a container_name")
        argv = _detached(spec.argv)
        try:
            state = self.inspect(name)
            if state is not None and state.running:
                raise LaunchError(
                    f"container {name} is already running and this fleetd has no record of "
                    f"launching it: stop it (`{self.runtime} stop {name}`) or let fleetd adopt it"
                )
            if state is not None:
                # Never ``rm --force``: that SIGKILLs a container that started running again
                # since the inspect (a restart policy), and rule 2 forbids killing an engine.
                removed = self._cli(["rm", name])
                if removed.returncode != 0:
                    raise LaunchError(
                        f"cannot remove the stopped container {name}: {last_line(removed.stderr)}"
                    )
            log_fd = open_log_or_refuse(self._files)
            try:
                self._files.write_marker(log_fd, argv)
            finally:
                os.close(log_fd)
            result = subprocess.run(
                [self._binary, *argv[1:]],
                capture_output=True,
                text=True,
                timeout=self._run_timeout_s,
                check=False,
                stdin=subprocess.DEVNULL,
                close_fds=True,  # no descriptor of fleetd's in the runtime CLI (issue 36)
                env=engine_environment(spec),
            )
            if result.returncode != 0:
                raise LaunchError(
                    f"`{self.runtime} run` failed (exit {result.returncode}): "
                    f"{last_line(result.stderr) or last_line(result.stdout)}"
                )
            state = self.inspect(name)
        except LauncherError as exc:
            raise LaunchError(str(exc)) from exc
        except FileNotFoundError as exc:
            raise LaunchError(
                f"{self.runtime} is not installed ({self._binary!r} not found)"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise LaunchError(
                f"`{self.runtime} run` did not return within {exc.timeout:.0f} s"
            ) from exc
        if state is None:
            raise LaunchError(f"container {name} vanished right after `{self.runtime} run`")
        record = record_for(
            spec,
            state.pid,
            process_start_time(state.pid) or time.clock_gettime(time.CLOCK_BOOTTIME),
            state.container_id,
        )
        write_record_keeping_engine(self._files, record)
        key = uuid.uuid4().hex
        self._watch(key, name, since=None)
        return EngineHandle(key=key, record=record, adopted=False)

    def _watch(self, key: str, name: str, since: str | None) -> None:
        logs_args = [self._binary, "logs", "--follow"]
        if since is not None:
            logs_args += ["--since", since]
        logs = subprocess.Popen(
            [*logs_args, name],
            stdin=subprocess.DEVNULL,
            close_fds=True,  # no descriptor of fleetd's in the runtime CLI (issue 36)
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        stdout = logs.stdout
        pump = run_in_thread(f"container-logs:{name}", lambda: self._pump(stdout), log=_LOG)
        waiter = subprocess.Popen(
            [self._binary, "wait", name],
            stdin=subprocess.DEVNULL,
            close_fds=True,  # no descriptor of fleetd's in the runtime CLI (issue 36)
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        with self._lock:
            self._watches[key] = _ContainerWatch(logs=logs, pump=pump, waiter=waiter)

    def _pump(self, stream: IO[bytes] | None) -> None:
        """Copy ``logs -f`` output into ``engine.log`` until the follower ends."""
        if stream is None:
            return
        fd = self._files.open_log()
        try:
            while True:
                chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
                if not chunk:
                    return
                os.write(fd, chunk)
        except (OSError, ValueError):
            _LOG.exception("copying container logs into %s failed", self._files.log_path)
        finally:
            os.close(fd)
            stream.close()

    def adopt(self, record: EngineRecord) -> EngineHandle | None:
        """The recorded container if it still runs with the recorded id."""
        if record.mode is LaunchMode.PROCESS or not record.container_name:
            return None
        state = self.inspect(record.container_name)
        if state is None or not state.running:
            return None
        if record.container_id and state.container_id != record.container_id:
            return None
        key = uuid.uuid4().hex
        self._watch(key, record.container_name, since=now_iso())
        return EngineHandle(key=key, record=record, adopted=True)

    def recipe_label(self, name: str) -> str:
        """The container's ``cmpfleet.recipe-hash`` label ("" when it has none)."""
        fmt = "{{index .Config.Labels " + f'"{RECIPE_HASH_LABEL}"' + "}}"
        result = self._cli(["inspect", "--type", "container", "--format", fmt, name])
        if result.returncode != 0:
            raise LauncherError(f"{self.runtime} inspect {name} failed: {last_line(result.stderr)}")
        label = result.stdout.strip()
        return "" if label in ("", "<no value>") else label

    def adopt_running(self, spec: LaunchSpec) -> EngineHandle | None:
        """A running container named ``spec.container_name`` with no record: adopt it.

        Only when its ``cmpfleet.recipe-hash`` label is the spec's recipe hash: a container
        started by hand (or from another profile) under that name is reported, never
        taken for the recipe (``EngineDrifted``).
        """
        if spec.mode is LaunchMode.PROCESS or not spec.container_name:
            return None
        state = self.inspect(spec.container_name)
        if state is None or not state.running:
            return None
        label = self.recipe_label(spec.container_name)
        if label != spec.recipe_hash:
            raise EngineDrifted(state.pid, spec.container_name, label, spec.base_url)
        record = record_for(
            spec,
            state.pid,
            process_start_time(state.pid) or time.clock_gettime(time.CLOCK_BOOTTIME),
            state.container_id,
        )
        self._files.write(record)
        key = uuid.uuid4().hex
        self._watch(key, spec.container_name, since=now_iso())
        return EngineHandle(key=key, record=record, adopted=True)

    def _state(self, handle: EngineHandle) -> ContainerState | None:
        name = handle.record.container_name
        if name is None:
            return None
        state = self.inspect(name)
        if state is None:
            return None
        if handle.record.container_id and state.container_id != handle.record.container_id:
            return None  # a different container now carries the name
        return state

    def is_alive(self, handle: EngineHandle) -> bool:
        """``inspect`` says running, and it is still the same container."""
        state = self._state(handle)
        return state is not None and state.running

    def wait(self, handle: EngineHandle, timeout_s: float) -> bool:
        """Wait on the ``wait`` helper (it prints the exit code when the container ends)."""
        with self._lock:
            watch = self._watches.get(handle.key)
        if watch is None or watch.waiter is None:
            time.sleep(max(min(timeout_s, 1.0), 0.0))
            return not self.is_alive(handle)
        try:
            out, _ = watch.waiter.communicate(timeout=max(timeout_s, 0.0))
        except subprocess.TimeoutExpired:
            return False
        except ValueError:
            return not self.is_alive(handle)
        if watch.waiter.returncode == 0:
            with contextlib.suppress(ValueError, IndexError):
                watch.exit_code = int(out.split()[-1])
        return not self.is_alive(handle)

    def exit_code(self, handle: EngineHandle) -> int | None:
        """From ``wait`` if it reported, else from ``inspect``; None while running or unknown."""
        with self._lock:
            watch = self._watches.get(handle.key)
        try:
            state = self._state(handle)
        except LauncherError:
            state = None
        if state is not None and not state.running and state.oom_killed:
            self._note_oom_kill(handle)
        if watch is not None and watch.exit_code is not None:
            return watch.exit_code
        if state is None or state.running:
            return None
        return state.exit_code

    def _note_oom_kill(self, handle: EngineHandle) -> None:
        """Put the runtime's OOM verdict into engine.log (once), where the classifier reads.

        An OOM-killed container dies by SIGKILL with nothing in its own output; only
        ``State.OOMKilled`` says why.
        """
        with self._lock:
            if handle.key in self._oom_noted:
                return
            self._oom_noted.add(handle.key)
        with contextlib.suppress(OSError):
            fd = self._files.open_log()
            try:
                name = handle.record.container_name
                os.write(
                    fd,
                    f"[cmpfleet] container {name} was OOMKilled (inspect State.OOMKilled=true)\n".encode(),
                )
            finally:
                os.close(fd)

    def _kill(self, handle: EngineHandle, signal_name: str) -> None:
        name = handle.record.container_name
        if name is None:
            return
        result = self._cli(["kill", "--signal", signal_name, name])
        if result.returncode != 0 and self.is_alive(handle):
            raise LauncherError(
                f"{self.runtime} kill --signal {signal_name} {name} failed: "
                f"{last_line(result.stderr)}"
            )

    def signal_stop(self, handle: EngineHandle, graceful: bool) -> None:
        """``kill --signal INT`` (graceful) or ``kill --signal TERM``; never escalates."""
        self._kill(handle, "INT" if graceful else "TERM")

    def kill(self, handle: EngineHandle) -> None:
        """``stop -t 5``: TERM, then the runtime's SIGKILL (only with allow_kill, after INT/TERM)."""
        name = handle.record.container_name
        if name is None:
            return
        result = self._cli(["stop", "-t", str(STOP_KILL_AFTER_S), name])
        if result.returncode != 0 and self.is_alive(handle):
            raise LauncherError(
                f"{self.runtime} stop -t {STOP_KILL_AFTER_S} {name} failed: {last_line(result.stderr)}"
            )

    def survivors(self, handle: EngineHandle) -> tuple[int, ...]:
        """A container's processes end with it: none to report."""
        return ()

    def members(self, handle: EngineHandle) -> tuple[int, ...]:
        """The runtime's record says OOMKilled for the whole container: no pids needed."""
        return ()

    def _unwatch(self, handle: EngineHandle) -> None:
        with self._lock:
            watch = self._watches.pop(handle.key, None)
        if watch is None:
            return
        for helper in (watch.logs, watch.waiter):
            if helper is None:
                continue
            if helper.poll() is None:
                helper.terminate()  # a runtime client, not the engine
            try:
                helper.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _LOG.warning("%s helper pid %d did not exit", self.runtime, helper.pid)
            for stream in (helper.stdout, helper.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError, ValueError):
                        stream.close()
        if watch.pump is not None:
            watch.pump.join(5)

    def release(self, handle: EngineHandle) -> None:
        """Stop following the ended container and remove its record.

        The container itself stays for ``docker logs`` until the next start removes it.
        """
        self._unwatch(handle)
        self._files.remove_if(handle.record)

    def detach(self, handle: EngineHandle) -> None:
        """Stop following; the container keeps running and the record stays."""
        self._unwatch(handle)


def _detached(argv: tuple[str, ...]) -> tuple[str, ...]:
    """``argv`` with ``--detach`` after ``run`` unless it already detaches."""
    if len(argv) < 2 or argv[1] != "run":
        raise LaunchError(f"a container spec's argv must be `<runtime> run ...`, got {argv[:2]}")
    if "-d" in argv or "--detach" in argv or "--detach=true" in argv:
        return argv
    return (argv[0], "run", "--detach", *argv[2:])
