"""The bare-process launcher: the engine in its own session, output into ``engine.log``."""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import signal
import threading
import time
import uuid
from pathlib import Path

import psutil

from serving.recipe.spec import LaunchMode, LaunchSpec
from serving.runtime.engine_record import (
    EngineRecord,
    RecordError,
    RecordFile,
    process_start_time,
    record_for,
    runs_as,
)
from serving.runtime.launchers import (
    EngineHandle,
    LauncherError,
    LaunchError,
    engine_environment,
    open_log_or_refuse,
    write_record_keeping_engine,
)

_LOG = logging.getLogger(__name__)


class ProcessLauncher:
    """Runs the engine as a bare process in its own session, output into ``engine.log``.

    Spawned with ``os.posix_spawn(..., setsid=True)`` rather than ``subprocess.Popen``:
    a ``Popen`` object warns when it is dropped while its child still runs, and here that
    is the normal case (the engine outlives the launcher and fleetd). The child is reaped
    with ``waitpid``; exit is watched through a pidfd, which works for a child and for an
    adopted process alike. A child's exit code is known, an adopted process's is not.

    The engine gets stdin, stdout and stderr and no other descriptor of fleetd's: every
    one open at the spawn is closed in the child (``posix_spawn`` keeps whatever is not
    close-on-exec). An engine outlives fleetd, so a socket, the store or the lock it
    inherited would stay open after fleetd ends: a listening socket kept the next fleetd
    from binding its port (issue 36).
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
        log_fd = open_log_or_refuse(self._files)
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
        write_record_keeping_engine(self._files, record)
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
                    *((os.POSIX_SPAWN_CLOSE, fd) for fd in open_descriptors() if fd > 2),
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
        return tuple(pid for pid in self._group(handle) if pid != handle.pid)

    def members(self, handle: EngineHandle) -> tuple[int, ...]:
        """The engine's process group now (its own session: workers and a wrapper's child)."""
        return self._group(handle)

    @staticmethod
    def _group(handle: EngineHandle) -> tuple[int, ...]:
        found: list[int] = []
        for pid in psutil.pids():
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


def open_descriptors() -> list[int]:
    """This process's open file descriptors (``/proc/self/fd``; a closed one is harmless).

    glibc's ``posix_spawn`` ignores a close action on a descriptor that is not open, so one
    another thread closes meanwhile costs nothing; one opened meanwhile is close-on-exec
    (Python's default, PEP 446) unless a library opened it otherwise.
    """
    try:
        return sorted(int(name) for name in os.listdir("/proc/self/fd"))
    except OSError:  # no /proc: the range every fleetd opens within
        return list(range(3, 1024))
