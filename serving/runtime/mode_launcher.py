"""One launcher for every mode: profiles of one rig may run as a process or a container.

The supervisor holds one ``Launcher`` for its lifetime, yet ``fleetctl serve NAME`` can
switch from a bare-process profile to a docker one. This launcher hands each call to the
launcher of the spec's (or the record's) mode, created once and kept, so a container
launcher's followers survive between calls. Every mode shares the state dir's
``engine.pid`` and ``engine.log``, so adoption and the log read the same files whatever
the mode of the engine that wrote them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from serving.recipe.spec import LaunchMode, LaunchSpec
from serving.runtime.container_launcher import ContainerLauncher
from serving.runtime.engine_record import EngineRecord, RecordFile
from serving.runtime.launchers import EngineHandle, Launcher
from serving.runtime.process_launcher import ProcessLauncher


def default_factory(mode: LaunchMode, state_dir: Path) -> Launcher:
    """The launcher of one mode."""
    if mode is LaunchMode.PROCESS:
        return ProcessLauncher(state_dir)
    return ContainerLauncher(state_dir, runtime=str(mode))


class ModeLauncher:
    """A ``Launcher`` that dispatches on the launch mode."""

    def __init__(
        self,
        state_dir: Path,
        factory: Callable[[LaunchMode, Path], Launcher] = default_factory,
    ) -> None:
        self._state_dir = state_dir
        self._factory = factory
        self._files = RecordFile(state_dir)
        self._launchers: dict[LaunchMode, Launcher] = {}

    def _of(self, mode: LaunchMode) -> Launcher:
        launcher = self._launchers.get(mode)
        if launcher is None:
            launcher = self._launchers[mode] = self._factory(mode, self._state_dir)
        return launcher

    def _for(self, handle: EngineHandle) -> Launcher:
        return self._of(handle.record.mode)

    @property
    def log_path(self) -> Path:
        """``engine.log`` in the state dir (the same file in every mode)."""
        return self._files.log_path

    def read_record(self) -> EngineRecord | None:
        """The adoption record, whatever mode wrote it."""
        return self._files.read()

    def start(self, spec: LaunchSpec) -> EngineHandle:
        """Launch with the spec's mode's launcher."""
        return self._of(spec.mode).start(spec)

    def adopt(self, record: EngineRecord) -> EngineHandle | None:
        """Adopt with the record's mode's launcher."""
        return self._of(record.mode).adopt(record)

    def adopt_running(self, spec: LaunchSpec) -> EngineHandle | None:
        """An unrecorded engine of the spec's mode."""
        return self._of(spec.mode).adopt_running(spec)

    def is_alive(self, handle: EngineHandle) -> bool:
        """See :class:`Launcher`."""
        return self._for(handle).is_alive(handle)

    def wait(self, handle: EngineHandle, timeout_s: float) -> bool:
        """See :class:`Launcher`."""
        return self._for(handle).wait(handle, timeout_s)

    def exit_code(self, handle: EngineHandle) -> int | None:
        """See :class:`Launcher`."""
        return self._for(handle).exit_code(handle)

    def signal_stop(self, handle: EngineHandle, graceful: bool) -> None:
        """See :class:`Launcher`."""
        self._for(handle).signal_stop(handle, graceful)

    def kill(self, handle: EngineHandle) -> None:
        """See :class:`Launcher`."""
        self._for(handle).kill(handle)

    def survivors(self, handle: EngineHandle) -> tuple[int, ...]:
        """See :class:`Launcher`."""
        return self._for(handle).survivors(handle)

    def members(self, handle: EngineHandle) -> tuple[int, ...]:
        """See :class:`Launcher`."""
        return self._for(handle).members(handle)

    def release(self, handle: EngineHandle) -> None:
        """See :class:`Launcher`."""
        self._for(handle).release(handle)

    def detach(self, handle: EngineHandle) -> None:
        """See :class:`Launcher`."""
        self._for(handle).detach(handle)
