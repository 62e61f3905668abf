"""Start, watch, signal and adopt the engine: the only module that spawns processes.

Two launchers share one protocol: :class:`ProcessLauncher` runs ``spec.argv`` as a bare
process, :class:`ContainerLauncher` runs it as a ``docker``/``podman`` container.

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

import contextlib
import logging
import os
import select
import shutil
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

import psutil

from serving.engine_record import (
    EngineRecord,
    RecordError,
    RecordFile,
    now_iso,
    process_start_time,
    record_for,
    runs_as,
)
from serving.spec import LaunchMode, LaunchSpec

_LOG = logging.getLogger(__name__)

_INSPECT_FORMAT = (
    "{{.Id}} {{.State.Running}} {{.State.ExitCode}} {{.State.Pid}} {{.State.OOMKilled}}"
)


class LaunchError(Exception):
    """The engine could not be started; the message says why in one line."""


class LauncherError(Exception):
    """A launcher operation (inspect, signal) failed; the message says which and why."""


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

    def release(self, handle: EngineHandle) -> None:
        """The engine has ended: drop what watched it and remove its record."""
        ...

    def detach(self, handle: EngineHandle) -> None:
        """fleetd leaves but the engine keeps running: drop watchers, keep the record."""
        ...


class ProcessLauncher:
    """Runs the engine as a bare process in its own session, output into ``engine.log``.

    Spawned with ``os.posix_spawn(..., setsid=True)`` rather than ``subprocess.Popen``:
    a ``Popen`` object warns when it is dropped while its child still runs, and here that
    is the normal case (the engine outlives the launcher and fleetd). The child is reaped
    with ``waitpid``; exit is watched through a pidfd, which works for a child and for an
    adopted process alike. A child's exit code is known, an adopted process's is not.
    """

    def __init__(self, state_dir: Path) -> None:
        self._files = RecordFile(state_dir)
        self._lock = threading.Lock()
        # key -> pid of engines this launcher spawned (and may reap), and their exit codes.
        self._children: dict[str, int] = {}
        self._exit_codes: dict[str, int | None] = {}
        self._pidfds: dict[str, int] = {}

    @property
    def log_path(self) -> Path:
        """``engine.log`` in the state dir."""
        return self._files.log_path

    def read_record(self) -> EngineRecord | None:
        """The adoption record (see :class:`Launcher`)."""
        return self._files.read()

    def start(self, spec: LaunchSpec) -> EngineHandle:
        """Spawn ``spec.argv`` with ``spec.env`` added to fleetd's environment."""
        if spec.mode is not LaunchMode.PROCESS:
            raise LaunchError(f"the process launcher cannot run a {spec.mode} spec")
        if not spec.argv:
            raise LaunchError("the launch spec has an empty argv")
        existing = self._read_or_refuse()
        if existing is not None and runs_as(existing.pid, existing.start_time):
            raise LaunchError(
                f"an engine launched earlier still runs (pid {existing.pid}, "
                f"{self._files.record_path}): adopt it or stop it first"
            )
        env = engine_environment(spec)
        log_fd = _open_log_or_refuse(self._files)
        try:
            self._files.write_marker(log_fd, spec.argv)
            pid = self._spawn(spec.argv, env, log_fd)
        except LaunchError as exc:
            with contextlib.suppress(OSError):
                os.write(log_fd, f"[cmpfleet] launch failed: {exc}\n".encode())
            raise
        finally:
            os.close(log_fd)
        key = uuid.uuid4().hex
        pidfd = self._open_pidfd(pid)
        start_time = process_start_time(pid) or time.clock_gettime(time.CLOCK_BOOTTIME)
        record = record_for(spec, pid, start_time)
        with self._lock:
            self._children[key] = pid
            if pidfd is not None:
                self._pidfds[key] = pidfd
        _write_record_keeping_engine(self._files, record)
        return EngineHandle(key=key, record=record, adopted=False)

    @staticmethod
    def _spawn(argv: tuple[str, ...], env: dict[str, str], log_fd: int) -> int:
        """Exec ``argv`` in a new session: stdin from /dev/null, stdout+stderr to the log."""
        program = argv[0]
        if os.sep not in program:
            found = shutil.which(program, path=env.get("PATH", os.defpath))
            if found is None:
                raise LaunchError(f"cannot run {program!r}: not found on PATH")
            program = found
        try:
            return os.posix_spawn(
                program,
                list(argv),
                env,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, log_fd, 1),
                    (os.POSIX_SPAWN_DUP2, log_fd, 2),
                ],
                setsid=True,
            )
        except OSError as exc:
            raise LaunchError(f"cannot run {argv[0]!r}: {exc.strerror or exc}") from exc

    def _reap(self, key: str) -> bool:
        """For a child of ours: collect its exit status if it ended; True once ended."""
        with self._lock:
            pid = self._children.get(key)
            if pid is None:
                return False
            if key in self._exit_codes:
                return True
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                self._exit_codes[key] = None  # reaped elsewhere: ended, status unknown
                return True
            if done == 0:
                return False
            self._exit_codes[key] = os.waitstatus_to_exitcode(status)
            return True

    def _read_quietly(self) -> EngineRecord | None:
        try:
            return self._files.read()
        except RecordError as exc:
            _LOG.warning("ignoring an unusable adoption record: %s", exc)
            return None

    def _read_or_refuse(self) -> EngineRecord | None:
        """The record, or a refusal: with an unreadable one, an engine may still run."""
        try:
            return self._files.read()
        except RecordError as exc:
            raise LaunchError(
                f"{exc}: an engine may still run; check (ps, nvidia-smi), then remove the file"
            ) from exc

    @staticmethod
    def _open_pidfd(pid: int) -> int | None:
        try:
            return os.pidfd_open(pid)
        except OSError as exc:
            # Old kernels (< 5.3) or a process already reaped: fall back to polling.
            _LOG.info("no pidfd for pid %d (%s): exit is detected by polling", pid, exc)
            return None

    def adopt(self, record: EngineRecord) -> EngineHandle | None:
        """Verify pid and start time, then watch the engine without restarting it."""
        if record.mode is not LaunchMode.PROCESS:
            return None
        pidfd = self._open_pidfd(record.pid)
        # Verified after opening the pidfd: the descriptor pins the process we verified.
        if not runs_as(record.pid, record.start_time):
            if pidfd is not None:
                os.close(pidfd)
            return None
        key = uuid.uuid4().hex
        if pidfd is not None:
            with self._lock:
                self._pidfds[key] = pidfd
        return EngineHandle(key=key, record=record, adopted=True)

    def adopt_running(self, spec: LaunchSpec) -> EngineHandle | None:
        """A bare process cannot be recognised safely without its record: never."""
        return None

    def is_alive(self, handle: EngineHandle) -> bool:
        """A child: not yet exited. Adopted: same pid and start time, not a zombie."""
        with self._lock:
            ours = handle.key in self._children
        if ours:
            return not self._reap(handle.key)
        return runs_as(handle.record.pid, handle.record.start_time)

    def wait(self, handle: EngineHandle, timeout_s: float) -> bool:
        """Block on the pidfd (or poll) up to ``timeout_s``; True once the engine ended."""
        with self._lock:
            pidfd = self._pidfds.get(handle.key)
        if pidfd is not None:
            try:
                ready, _, _ = select.select([pidfd], [], [], max(timeout_s, 0.0))
            except (OSError, ValueError):
                # The descriptor was closed by release/detach meanwhile.
                return not self.is_alive(handle)
            return bool(ready) and not self.is_alive(handle)
        deadline = time.monotonic() + max(timeout_s, 0.0)
        while True:
            if not self.is_alive(handle):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(0.2, remaining))

    def exit_code(self, handle: EngineHandle) -> int | None:
        """A child's exit code (negative: killed by that signal); None when adopted."""
        self._reap(handle.key)
        with self._lock:
            return self._exit_codes.get(handle.key)

    def _signal_group(self, handle: EngineHandle, signum: signal.Signals) -> None:
        if not self.is_alive(handle):
            return
        pid = handle.pid
        try:
            target_group = os.getpgid(pid) == pid
            if target_group:
                os.killpg(pid, signum)
            else:
                os.kill(pid, signum)
        except ProcessLookupError:
            return
        except PermissionError as exc:
            raise LauncherError(
                f"not allowed to send {signum.name} to the engine (pid {pid}): {exc.strerror}"
            ) from exc

    def signal_stop(self, handle: EngineHandle, graceful: bool) -> None:
        """SIGINT (graceful) or SIGTERM to the engine's whole process group."""
        self._signal_group(handle, signal.SIGINT if graceful else signal.SIGTERM)

    def kill(self, handle: EngineHandle) -> None:
        """SIGKILL the engine's process group (the supervisor gates this on allow_kill)."""
        self._signal_group(handle, signal.SIGKILL)

    def survivors(self, handle: EngineHandle) -> tuple[int, ...]:
        """Live processes still in the engine's process group (they may hold GPU memory)."""
        found: list[int] = []
        for pid in psutil.pids():
            if pid == handle.pid:
                continue
            try:
                if os.getpgid(pid) != handle.pid:
                    continue
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    found.append(pid)
            except (ProcessLookupError, psutil.NoSuchProcess):
                continue
        return tuple(found)

    def _forget(self, handle: EngineHandle) -> None:
        with self._lock:
            self._children.pop(handle.key, None)
            self._exit_codes.pop(handle.key, None)
            pidfd = self._pidfds.pop(handle.key, None)
        if pidfd is not None:
            os.close(pidfd)

    def release(self, handle: EngineHandle) -> None:
        """Reap the child if it is ours, close the pidfd, remove the record."""
        self._reap(handle.key)
        self._forget(handle)
        self._files.remove_if(handle.record)

    def detach(self, handle: EngineHandle) -> None:
        """Leave the engine running for the next fleetd; keep its record.

        If it ends while this fleetd still runs it stays a zombie until fleetd exits;
        liveness checks treat a zombie as ended, so a later adoption is not fooled.
        """
        self._forget(handle)


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
    pump: threading.Thread | None
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
            raise LauncherError(
                f"{self.runtime} inspect {name} failed: {_last_line(result.stderr)}"
            )
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
                removed = self._cli(["rm", "--force", name])
                if removed.returncode != 0:
                    raise LaunchError(
                        f"cannot remove the stopped container {name}: {_last_line(removed.stderr)}"
                    )
            log_fd = _open_log_or_refuse(self._files)
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
                env=engine_environment(spec),
            )
            if result.returncode != 0:
                raise LaunchError(
                    f"`{self.runtime} run` failed (exit {result.returncode}): "
                    f"{_last_line(result.stderr) or _last_line(result.stdout)}"
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
        _write_record_keeping_engine(self._files, record)
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
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        pump = threading.Thread(
            target=self._pump, args=(logs.stdout,), name=f"container-logs:{name}", daemon=True
        )
        pump.start()
        waiter = subprocess.Popen(
            [self._binary, "wait", name],
            stdin=subprocess.DEVNULL,
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

    def adopt_running(self, spec: LaunchSpec) -> EngineHandle | None:
        """A running container named ``spec.container_name`` with no record: adopt it."""
        if spec.mode is LaunchMode.PROCESS or not spec.container_name:
            return None
        state = self.inspect(spec.container_name)
        if state is None or not state.running:
            return None
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
                f"{_last_line(result.stderr)}"
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
                f"{self.runtime} stop -t {STOP_KILL_AFTER_S} {name} failed: {_last_line(result.stderr)}"
            )

    def survivors(self, handle: EngineHandle) -> tuple[int, ...]:
        """A container's processes end with it: none to report."""
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
            watch.pump.join(timeout=5)

    def release(self, handle: EngineHandle) -> None:
        """Stop following the ended container and remove its record.

        The container itself stays for ``docker logs`` until the next start removes it.
        """
        self._unwatch(handle)
        self._files.remove_if(handle.record)

    def detach(self, handle: EngineHandle) -> None:
        """Stop following; the container keeps running and the record stays."""
        self._unwatch(handle)


# fleetd's own plumbing: the engine must not talk to systemd or inherit its sockets.
_NOT_FOR_THE_ENGINE = (
    "NOTIFY_SOCKET",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
)


def engine_environment(spec: LaunchSpec) -> dict[str, str]:
    """fleetd's environment minus its systemd plumbing, plus the recipe's variables."""
    base = {k: v for k, v in os.environ.items() if k not in _NOT_FOR_THE_ENGINE}
    return {**base, **spec.env}


def _open_log_or_refuse(files: RecordFile) -> int:
    """Open ``engine.log`` before anything is spawned; a disk problem is a refusal."""
    try:
        return files.open_log()
    except OSError as exc:
        raise LaunchError(f"cannot open {files.log_path}: {exc.strerror or exc}") from exc


def _write_record_keeping_engine(files: RecordFile, record: EngineRecord) -> None:
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


def _detached(argv: tuple[str, ...]) -> tuple[str, ...]:
    """``argv`` with ``--detach`` after ``run`` unless it already detaches."""
    if len(argv) < 2 or argv[1] != "run":
        raise LaunchError(f"a container spec's argv must be `<runtime> run ...`, got {argv[:2]}")
    if "-d" in argv or "--detach" in argv or "--detach=true" in argv:
        return argv
    return (argv[0], "run", "--detach", *argv[2:])


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""
