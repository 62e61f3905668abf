"""The host's room for the engine: free space where the model and the state live, and RAM.

A cold start takes 20 to 45 minutes; one that fails at minute 20 because the model's
filesystem filled with Triton caches, or because vLLM's workers and shared memory do not
fit in RAM, costs the whole start. fleetd reads, at each poll, the filesystems of the
state dir (the history, the engine log) and of the model (its host path), and the RAM
(``/proc/meminfo``); the ``host_resources`` check judges them against what the profile in
force needs. The reader takes ``proc_root`` and ``statvfs`` so tests replay recorded
values.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class FilesystemRoom:
    """One filesystem as a path on it sees it: ``label`` says whose (``state dir``, ``model``)."""

    label: str
    path: str
    total_mib: int
    free_mib: int

    @property
    def free_pct(self) -> float:
        """Free space, % of the filesystem."""
        return 100.0 * self.free_mib / self.total_mib if self.total_mib else 0.0


@dataclass(frozen=True, slots=True)
class HostResources:
    """The filesystems and RAM as last read, and the RAM the profile in force needs."""

    filesystems: tuple[FilesystemRoom, ...] = ()
    memory_total_mib: int | None = None
    memory_available_mib: int | None = None
    ram_needed_mib: int | None = None


def _meminfo(proc_root: Path) -> dict[str, int]:
    """``/proc/meminfo`` in MiB (``MemTotal``, ``MemAvailable``); empty when unreadable."""
    found: dict[str, int] = {}
    try:
        text = (proc_root / "meminfo").read_text()
    except OSError:
        return found
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        words = rest.split()
        if words and words[0].isdecimal():
            found[key.strip()] = int(words[0]) // 1024  # kB
    return found


def _existing(path: Path) -> Path | None:
    """``path`` or its nearest existing parent (a model path not there yet: its mount)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return None


def read_resources(
    paths: Sequence[tuple[str, Path]],
    ram_needed_mib: int | None = None,
    *,
    proc_root: Path = Path("/proc"),
    statvfs: Callable[[Path], os.statvfs_result] = os.statvfs,
) -> HostResources:
    """The filesystems of ``paths`` (``(label, path)``; one per filesystem) and the RAM."""
    rooms: list[FilesystemRoom] = []
    seen: set[int] = set()
    for label, path in paths:
        there = _existing(path)
        if there is None:
            continue
        try:
            fs = statvfs(there)
        except OSError:
            continue
        if fs.f_fsid in seen:
            continue
        seen.add(fs.f_fsid)
        rooms.append(
            FilesystemRoom(
                label,
                str(path),
                total_mib=fs.f_blocks * fs.f_frsize // MIB,
                free_mib=fs.f_bavail * fs.f_frsize // MIB,
            )
        )
    memory = _meminfo(proc_root)
    return HostResources(
        tuple(rooms), memory.get("MemTotal"), memory.get("MemAvailable"), ram_needed_mib
    )
