"""``host_resources``: room on the model's and the state dir's filesystems, and RAM.

A start fails 20 minutes into a cold start when the model's filesystem fills (Triton and
compile caches, logs) or the host cannot hold the engine's workers and shared memory; the
history stops being written when the state dir's filesystem is full. Nearly full is a
warning, full a critical (``[rig] disk_free_warn_pct`` / ``disk_free_crit_pct``); RAM
below what the profile in force needs is a warning (``hwcheck.resources``). Not read
(``fleetctl check``, a host where nothing can be read): no result.
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput, fmt_num
from hwcheck.checks.spec import Alert, CheckSpec, CheckText
from hwcheck.model import CheckResult, Severity
from hwcheck.resources import FilesystemRoom

CHECK_ID = "host_resources"
DISK_REMEDY = (
    "free space on {path}'s filesystem (old checkpoints, ~/.cache/vllm and Triton caches, "
    "rotated logs: du -xh --max-depth=2 {path} | sort -h)"
)


def _gib(mib: int) -> str:
    return f"{fmt_num(round(mib / 1024, 1), 'GiB')}"


def _disk(inp: CheckInput, room: FilesystemRoom) -> CheckResult:
    warn, crit = inp.profile.disk_free_warn_pct, inp.profile.disk_free_crit_pct
    text = (
        f"{room.label} ({room.path}): {_gib(room.free_mib)} free of {_gib(room.total_mib)} "
        f"({room.free_pct:.0f}%)"
    )
    if room.free_pct < crit:
        severity = Severity.CRITICAL
    elif room.free_pct < warn:
        severity = Severity.WARNING
    else:
        return CheckResult(CHECK_ID, None, Severity.OK, text)
    limit = crit if severity is Severity.CRITICAL else warn
    return CheckResult(
        CHECK_ID,
        None,
        severity,
        f"{text}: below {limit:g}% free",
        DISK_REMEDY.format(path=room.path),
    )


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per filesystem read, and one for RAM when its need is known."""
    resources = inp.resources
    if resources is None:
        return []
    results = [_disk(inp, room) for room in resources.filesystems]
    total, need = resources.memory_total_mib, resources.ram_needed_mib
    if total is not None and need is not None:
        text = f"RAM {_gib(total)}, the profile in force needs about {_gib(need)}"
        if total < need:
            results.append(
                CheckResult(
                    CHECK_ID,
                    None,
                    Severity.WARNING,
                    f"{text}: short by {_gib(need - total)}",
                    "add RAM (or swap), or lower the profile's shm_size and max-num-seqs",
                )
            )
        else:
            results.append(CheckResult(CHECK_ID, None, Severity.OK, text))
    return results


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "disk or memory short",
        "The model's filesystem and the state dir's fill (engine logs, Triton caches, "
        "fleet.db) or the host's RAM is short for the profile (vLLM loads the weights "
        "through host memory; shm for the workers): a start then fails 20 minutes in.",
        "free space on the filesystem named (old checkpoints, caches, logs), or add RAM or "
        "swap; [rig] disk_warn_free_pct and ram tolerance tune it.",
    ),
    alert=Alert("HostResourcesLow", "Disk or RAM short"),
    tag="DISK",
)
