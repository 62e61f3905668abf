"""``foreign_gpu_processes``: processes other than the engine holding ``/dev/nvidia*``.

Xorg, display managers and streaming services keep GPU contexts open; they have blocked
resets on these rigs and eat memory the engine expects. Some holders belong on every
rig and are never foreign: ``nvidia-persistenced`` (the ``persistence_mode`` remedy
recommends it) and ``fleetd`` (NVML keeps ``/dev/nvidiactl`` open), plus the names in
``[rig] allowed_gpu_processes``. The engine's own process tree (process or container)
and the scanning process are excluded by pid before the holders reach this check.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence

from hwcheck.checks.base import CheckInput
from hwcheck.model import CheckResult, DeviceHolder, Severity

CHECK_ID = "foreign_gpu_processes"

# Process names (``comm``) that hold GPU devices on every healthy rig.
BUILTIN_ALLOWED_NAMES: tuple[str, ...] = ("nvidia-persistenced", "fleetd")


def is_allowed(holder: DeviceHolder, allowed_names: Iterable[str]) -> bool:
    """True when the holder's process name matches a built-in or configured name (globs ok)."""
    names = (*BUILTIN_ALLOWED_NAMES, *allowed_names)
    return any(fnmatch.fnmatchcase(holder.name, pattern) for pattern in names)


def _listed(holders: Sequence[DeviceHolder]) -> tuple[int, str]:
    by_pid: dict[tuple[int, str], list[str]] = {}
    for holder in holders:
        by_pid.setdefault((holder.pid, holder.name), []).append(holder.device)
    text = "; ".join(
        f"pid {pid} {name} ({', '.join(sorted(devices))})"
        for (pid, name), devices in sorted(by_pid.items())
    )
    return len(by_pid), text


def check(inp: CheckInput) -> list[CheckResult]:
    """One rig-wide result."""
    allowed_names = inp.profile.allowed_gpu_processes
    foreign = [h for h in inp.holders if not is_allowed(h, allowed_names)]
    allowed = [h for h in inp.holders if is_allowed(h, allowed_names)]
    if not foreign:
        message = "no foreign process holds /dev/nvidia*"
        if allowed:
            count, text = _listed(allowed)
            message += f" ({count} allowed: {text})"
        return [CheckResult(CHECK_ID, None, Severity.OK, message)]
    count, text = _listed(foreign)
    return [
        CheckResult(
            CHECK_ID,
            None,
            Severity.WARNING,
            f"{count} foreign process(es) hold GPU devices: {text}",
            "stop Xorg/display manager or streaming services: they block resets "
            "(or add the name to [rig] allowed_gpu_processes)",
        )
    ]
