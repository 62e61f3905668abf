"""Name the compute processes NVML lists on a card: their command name and container.

NVML gives a pid and the memory it holds; a person needs "vllm in docker 3f2a1b0c9d8e"
(nvitop's process rows). The name is ``/proc/<pid>/comm``; the container is the 64-hex
id a runtime puts in ``/proc/<pid>/cgroup`` (``docker-<id>.scope``, ``/docker/<id>``,
``libpod-<id>.scope``), shown short as ``docker 3f2a1b0c9d8e`` (``docker ps`` takes it).
``proc_root`` is a parameter so tests replay a recorded ``/proc`` tree, as
``hwcheck.holders`` does. A pid that is gone or unreadable keeps ``None``: NVML can list
a process of another pid namespace, and a process can end between the two reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from hwcheck.model import GpuProcess

_RUNTIMES = (
    (re.compile(r"libpod-(?:conmon-)?([0-9a-f]{64})"), "podman"),
    (re.compile(r"docker[-/]([0-9a-f]{64})"), "docker"),
    (re.compile(r"containerd[-/:]([0-9a-f]{64})"), "containerd"),
    (re.compile(r"([0-9a-f]{64})"), "container"),
)
SHORT_ID_CHARS = 12  # what docker ps and podman ps show


def container_of(cgroup_text: str) -> str | None:
    """``docker 3f2a1b0c9d8e`` from a ``/proc/<pid>/cgroup`` text (None: not in one)."""
    for pattern, runtime in _RUNTIMES:
        match = pattern.search(cgroup_text)
        if match is not None:
            return f"{runtime} {match.group(1)[:SHORT_ID_CHARS]}"
    return None


class ProcessNamer:
    """Reads names and containers of pids under ``proc_root``."""

    def __init__(self, proc_root: Path = Path("/proc")) -> None:
        self._proc_root = proc_root

    def _read(self, pid: int, name: str) -> str | None:
        try:
            return (self._proc_root / str(pid) / name).read_text(errors="replace")
        except OSError:
            return None

    def describe(self, process: GpuProcess) -> GpuProcess:
        """``process`` with its name and container filled in where ``/proc`` tells them."""
        comm = self._read(process.pid, "comm")
        cgroup = self._read(process.pid, "cgroup")
        return replace(
            process,
            name=process.name or (comm.strip() or None if comm is not None else None),
            container=process.container or (None if cgroup is None else container_of(cgroup)),
        )

    def describe_all(self, processes: Iterable[GpuProcess]) -> tuple[GpuProcess, ...]:
        """Every process described, in NVML's order."""
        return tuple(self.describe(process) for process in processes)
