"""Find processes that hold ``/dev/nvidia*`` open (Xorg, streaming services, stray jobs).

Why: a foreign holder blocks GPU resets and keeps contexts alive. psutil's
``Process.open_files()`` lists regular files only, never character devices, so this
reads the ``/proc/<pid>/fd/*`` links itself. ``proc_root`` and ``process_iter`` are
parameters so tests can replay a recorded ``/proc`` tree.
"""

from __future__ import annotations

import fnmatch
import logging
import os
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import psutil

from hwcheck.gpu_processes import container_of
from hwcheck.model import DeviceHolder

_LOG = logging.getLogger(__name__)


class ProcessLike(Protocol):
    """What this module needs of a ``psutil.Process``."""

    @property
    def pid(self) -> int:
        """The process id."""
        ...

    def name(self) -> str:
        """The process name (``comm``)."""
        ...

    def cmdline(self) -> list[str]:
        """The argv of the process."""
        ...


ProcessIter = Callable[[], Iterable[ProcessLike]]


@dataclass(frozen=True, slots=True)
class HolderScan:
    """What one scan found, and the processes whose descriptors could not be read.

    ``unreadable`` pairs a pid with the reason (usually "Permission denied" when fleetd
    is not root); a process that exited mid-scan is not an error and is not listed.
    """

    holders: list[DeviceHolder]
    unreadable: list[tuple[int, str]] = field(default_factory=list)


def _fd_targets(fd_dir: Path) -> list[str]:
    """The link target of every fd of one process.

    Other OSErrors (permission denied) propagate for the caller to report; a process
    or fd that vanished mid-scan is a normal race and is simply not listed.
    """
    try:
        names = os.listdir(fd_dir)
    except (FileNotFoundError, ProcessLookupError):
        return []
    targets: list[str] = []
    for name in names:
        try:
            targets.append(os.readlink(fd_dir / name))
        except (FileNotFoundError, ProcessLookupError):
            continue  # the fd was closed between listdir and readlink
    return targets


def _cgroup_container(proc_root: Path, pid: int) -> str | None:
    """``docker 3f2a1b0c9d8e`` when the process runs in a container (its cgroup says so)."""
    try:
        return container_of((proc_root / str(pid) / "cgroup").read_text(errors="replace"))
    except OSError:
        return None


def _describe(proc: ProcessLike) -> tuple[str, str]:
    """``(name, cmdline)`` of a holder, ``("?", "")`` parts when psutil may not tell."""
    try:
        name = proc.name()
    except (psutil.AccessDenied, psutil.NoSuchProcess):
        name = "?"
    try:
        cmdline = " ".join(proc.cmdline())
    except (psutil.AccessDenied, psutil.NoSuchProcess):
        cmdline = ""
    return name, cmdline


def scan_device_holders(
    dev_glob: str = "/dev/nvidia*",
    process_iter: ProcessIter = psutil.process_iter,
    proc_root: Path = Path("/proc"),
    exclude_pids: Collection[int] = (),
) -> HolderScan:
    """Every ``(process, device)`` pair where a process holds a node matching ``dev_glob``.

    Skips this process and ``exclude_pids`` (the daemon passes the engine's pids).
    """
    skip = {os.getpid(), *exclude_pids}
    holders: list[DeviceHolder] = []
    unreadable: list[tuple[int, str]] = []
    for proc in process_iter():
        pid = proc.pid
        if pid in skip:
            continue
        try:
            targets = _fd_targets(proc_root / str(pid) / "fd")
        except OSError as exc:
            unreadable.append((pid, exc.strerror or str(exc)))
            continue
        devices = sorted({t for t in targets if fnmatch.fnmatchcase(t, dev_glob)})
        if not devices:
            continue
        name, cmdline = _describe(proc)
        boxed = _cgroup_container(proc_root, pid)
        holders.extend(
            DeviceHolder(pid, name, dev, cmdline, cgroup_container=boxed) for dev in devices
        )
    holders.sort(key=lambda h: (h.pid, h.device))
    return HolderScan(holders, sorted(unreadable))


def find_device_holders(
    dev_glob: str = "/dev/nvidia*",
    process_iter: ProcessIter = psutil.process_iter,
    proc_root: Path = Path("/proc"),
    exclude_pids: Collection[int] = (),
) -> list[DeviceHolder]:
    """Holders of ``dev_glob`` nodes; one warning line names pids we could not inspect."""
    scan = scan_device_holders(dev_glob, process_iter, proc_root, exclude_pids)
    if scan.unreadable:
        reasons = sorted({reason for _, reason in scan.unreadable})
        _LOG.warning(
            "could not inspect the open files of %d process(es) (%s; pids %s): "
            "run fleetd as root to see every holder of %s",
            len(scan.unreadable),
            ", ".join(reasons),
            ", ".join(str(pid) for pid, _ in scan.unreadable[:10]),
            dev_glob,
        )
    return scan.holders
