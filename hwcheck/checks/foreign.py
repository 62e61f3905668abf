"""``foreign_gpu_processes``: processes other than the engine holding ``/dev/nvidia*``.

Xorg, display managers and streaming services keep GPU contexts open; they have blocked
resets on these rigs and eat memory the engine expects. The daemon excludes the
engine's own pids before the holders reach this check.
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput
from hwcheck.model import CheckResult, Severity

CHECK_ID = "foreign_gpu_processes"


def check(inp: CheckInput) -> list[CheckResult]:
    """One rig-wide result."""
    if not inp.holders:
        return [CheckResult(CHECK_ID, None, Severity.OK, "no foreign process holds /dev/nvidia*")]
    by_pid: dict[tuple[int, str], list[str]] = {}
    for holder in inp.holders:
        by_pid.setdefault((holder.pid, holder.name), []).append(holder.device)
    listed = "; ".join(
        f"pid {pid} {name} ({', '.join(sorted(devices))})"
        for (pid, name), devices in sorted(by_pid.items())
    )
    return [
        CheckResult(
            CHECK_ID,
            None,
            Severity.WARNING,
            f"{len(by_pid)} foreign process(es) hold GPU devices: {listed}",
            "stop Xorg/display manager or streaming services: they block resets",
        )
    ]
