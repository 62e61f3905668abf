"""Name why the engine ended, from the last lines it printed, how it exited and the kernel log.

The supervisor hands the tail of the engine's log, its exit status and (for a SIGKILL)
the kernel's OOM-killer record for its pid to :func:`explain_exit`; the class decides how
the crash is reported and, later, whether the recovery policy suspects the hardware. Pure
functions over strings: no I/O, so every signature is tested as a table
(``crash_signatures`` holds them, with their origins).

One crash prints several signatures: a CUDA fault on one pipeline rank ends in
``EngineDeadError`` on the API server and gloo "Connection closed by peer" on the other
ranks, so a signature's strength decides (the cause over its consequences), then the
first error of the tail over the last frame.
"""

from __future__ import annotations

import re
import signal as signal_module
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from serving.runtime.crash_class import CrashClass
from serving.runtime.crash_signatures import (
    CGROUP_OOM,
    CUINIT,
    DRIVER_ERROR,
    FIRST_ERROR,
    HARMLESS,
    HINTS,
    LOGGED_ERROR,
    SEGFAULT,
    SIGNATURES,
    TORCH_FREE,
    TORCH_OOM,
    VMM_CONTEXT,
    Strength,
)

__all__ = [
    "CrashClass",
    "CrashVerdict",
    "advice_for",
    "classify_exit",
    "explain_exit",
    "first_error_line",
    "is_harmless",
    "split_returncode",
    "strip_hints",
    "was_sigkilled",
]

LAUNCH_MARKER_PREFIX = "[cmpfleet] launch "
"""Start of the line a launcher writes into the log before each launch (never evidence)."""


@dataclass(frozen=True)
class CrashVerdict:
    """A class with the line that proved it (``None`` when nothing matched) and advice."""

    crash_class: CrashClass
    evidence: str | None
    advice: str


_SIGKILL_EXIT_CODE = 128 + signal_module.SIGKILL
_GIB = 1 << 30
_UNITS = {
    "B": 1,
    "KB": 1 << 10,
    "KIB": 1 << 10,
    "MB": 1 << 20,
    "MIB": 1 << 20,
    "GB": _GIB,
    "GIB": _GIB,
    "TB": 1 << 40,
    "TIB": 1 << 40,
}
# A small allocation failing with this much free on the card is not a real OOM: the
# allocator could not map memory the card has (CUDA VMM on the GA100 CMP).
_VMM_FREE_MIN_BYTES = 4 * _GIB

_ADVICE: Mapping[CrashClass, str] = MappingProxyType(
    {
        CrashClass.CUDA_FAULT: (
            "CUDA fault in the engine: chase the Xid in the kernel log for the card that faulted, "
            "not the gloo 'Connection closed by peer' on other ranks"
        ),
        CrashClass.ENGINE_DEAD: (
            "the engine core died or failed to start: read the first traceback in the log above "
            "the EngineDeadError"
        ),
        CrashClass.KV_OOM: (
            "the KV cache does not fit: lower max_model_len (or max_num_seqs), or raise "
            "gpu_memory_utilization within the safe range"
        ),
        CrashClass.DRIVER_POISONED: (
            "the CUDA driver is poisoned (initialization failed): only a reboot clears it; "
            "do not reload nvidia_uvm"
        ),
        CrashClass.RPC_TIMEOUT: (
            "a worker stopped answering (RPC timeout): check the layer partition for the card "
            "count and the kernel log for an Xid"
        ),
        CrashClass.UNSUPPORTED_ARCH: (
            "stock vLLM has no sm_80 kernels for this model (Unsupported architecture): run the "
            "sm_80 fork the dsv4-flash presets name (haosdent/vllm dsv4-flash-a100 with "
            "allover326's patches), not stock vLLM"
        ),
        CrashClass.ALLOCATOR_VMM: (
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True cannot map memory on the GA100 CMP "
            "(CUDA VMM): remove expandable_segments from the recipe's [env]"
        ),
        CrashClass.OOM_KILLED: (
            "the kernel or the container runtime killed the engine for memory: raise the memory "
            "or shm limit, or lower the engine's host memory use"
        ),
        CrashClass.CUDA_OOM: (
            "the card ran out of memory while the engine ran: lower gpu_memory_utilization, "
            "max_num_seqs or max_num_batched_tokens"
        ),
        CrashClass.CHECKPOINT: (
            "a shard of the model's checkpoint could not be read (cut short by a copy or a "
            "download that stopped): `fleetctl recipe verify` names it; copy that shard again. "
            "The start's preflight refuses it before any card is touched ([serving] "
            'verify_checkpoint = "quick", the default)'
        ),
        CrashClass.KILLED: (
            "something outside fleetd sent the engine SIGKILL (exit 137) and the kernel log has "
            "no OOM kill for its pid: look for who (a person, a script, systemd's or the "
            "container runtime's stop timeout) in the journal around the exit"
        ),
        CrashClass.UNKNOWN: (
            "no known signature in the log: the first error line is quoted; read the engine "
            "log around it (an import error, a bad flag or a missing model path is the "
            "recipe's, not the card's)"
        ),
    }
)


def is_harmless(line: str) -> bool:
    """True for log lines vLLM prints in normal operation that must not be taken as faults."""
    return any(pattern.search(line) for pattern in HARMLESS)


def strip_hints(line: str) -> str:
    """``line`` without torch's boilerplate hints: they never outweigh the error itself."""
    for pattern in HINTS:
        line = pattern.sub("", line)
    return line


def split_returncode(returncode: int | None) -> tuple[int | None, int | None]:
    """Turn a ``Popen.returncode`` (negative for a signal) into ``(exit_code, signal)``."""
    if returncode is None:
        return None, None
    if returncode < 0:
        return None, -returncode
    return returncode, None


def was_sigkilled(exit_code: int | None, signal: int | None) -> bool:
    """True for an end by SIGKILL: the signal itself, or a container's exit status 137."""
    return signal == signal_module.SIGKILL or exit_code == _SIGKILL_EXIT_CODE


def advice_for(crash_class: CrashClass) -> str:
    """What a person should look at first for ``crash_class``."""
    return _ADVICE[crash_class]


def _bytes(size: str) -> float | None:
    match = re.fullmatch(r"([\d.]+) ?([KMGT]?i?B)", size.strip())
    if match is None:
        return None
    try:
        return float(match.group(1)) * _UNITS[match.group(2).upper()]
    except (ValueError, KeyError):
        return None


def _torch_oom(line: str) -> CrashClass | None:
    """A torch OOM line: ``allocator_vmm`` when a small allocation failed with GiBs free."""
    match = TORCH_OOM.search(line)
    if match is None:
        return None
    free_match = TORCH_FREE.search(line)
    want = _bytes(match.group("want"))
    free = None
    if free_match is not None:
        free = _bytes(free_match.group("free") or free_match.group("old"))
    if want is not None and free is not None and free >= _VMM_FREE_MIN_BYTES and want * 4 <= free:
        return CrashClass.ALLOCATOR_VMM
    return CrashClass.CUDA_OOM


def _match(line: str, vmm_context: bool) -> tuple[CrashClass, Strength] | None:
    """The class and strength ``line`` shows, if any."""
    oom = _torch_oom(line)
    if oom is not None:
        return oom, Strength.CAUSE
    if DRIVER_ERROR.search(line):
        if vmm_context:
            return CrashClass.ALLOCATOR_VMM, Strength.CAUSE
        return CrashClass.CUDA_FAULT, Strength.CAUSE
    for signature in SIGNATURES:
        if signature.pattern.search(line):
            return signature.crash_class, signature.strength
    return None


def first_error_line(lines: Sequence[str]) -> str | None:
    """The tail's first error: a Python exception, argparse's ``error:``, else an ERROR log line."""
    for pattern in (FIRST_ERROR, LOGGED_ERROR):
        for line in lines:
            if pattern.search(line):
                return line.strip()
    return None


def explain_exit(
    log_tail: Sequence[str],
    exit_code: int | None,
    signal: int | None,
    *,
    kernel_oom: str | None = None,
) -> CrashVerdict:
    """Classify an engine exit and keep the line that decided it.

    ``exit_code`` is the process or container exit status (``None`` when unknown, as for an
    adopted process or a death by signal); ``signal`` the signal that ended a child process.
    A container killed by SIGKILL reports exit code 137, which counts as a SIGKILL.
    ``kernel_oom`` is the kernel log's OOM-killer record for one of the engine's pids, when the
    caller found one (``hwcheck.kernellog.oom``).

    The strongest signature wins, and among equals the first in the tail: the root cause
    prints before the EngineDeadError and the gloo errors it causes, and torch's hints
    after an error are dropped. A SIGKILL without a signature is ``oom_killed`` when the
    kernel (or the container runtime) says memory ran out, else ``killed``. Nothing known:
    ``unknown``, quoting the first error line.
    """
    # fleetd's own launch marker quotes the argv (which may name an error text): never evidence.
    stripped = (
        strip_hints(line)
        for line in log_tail
        if not is_harmless(line) and not line.startswith(LAUNCH_MARKER_PREFIX)
    )
    lines = [line for line in stripped if line.strip()]
    segfault = next((line for line in reversed(lines) if SEGFAULT.search(line)), None)
    if segfault is not None and any(CUINIT.search(line) for line in lines):
        crash_class = CrashClass.DRIVER_POISONED
        return CrashVerdict(crash_class, segfault.strip(), _ADVICE[crash_class])
    vmm_context = any(VMM_CONTEXT.search(line) for line in lines)
    best: tuple[Strength, CrashClass, str] | None = None
    for line in lines:
        found = _match(line, vmm_context)
        if found is not None and (best is None or found[1] > best[0]):
            best = (found[1], found[0], line.strip())
    if best is not None and best[0] is Strength.CAUSE:
        return CrashVerdict(best[1], best[2], _ADVICE[best[1]])
    oom_note = next((line.strip() for line in lines if CGROUP_OOM.search(line)), None)
    if kernel_oom is not None or oom_note is not None:
        evidence = kernel_oom if kernel_oom is not None else oom_note
        return CrashVerdict(CrashClass.OOM_KILLED, evidence, _ADVICE[CrashClass.OOM_KILLED])
    if was_sigkilled(exit_code, signal):
        how = f"signal {signal}" if signal is not None else f"exit status {exit_code}"
        evidence = f"{how} (SIGKILL); no OOM-killer record for the engine's pids in the kernel log"
        return CrashVerdict(CrashClass.KILLED, evidence, _ADVICE[CrashClass.KILLED])
    if best is not None:
        return CrashVerdict(best[1], best[2], _ADVICE[best[1]])
    return CrashVerdict(CrashClass.UNKNOWN, first_error_line(lines), _ADVICE[CrashClass.UNKNOWN])


def classify_exit(
    log_tail: Sequence[str],
    exit_code: int | None,
    signal: int | None,
    *,
    kernel_oom: str | None = None,
) -> CrashClass:
    """The :class:`CrashClass` of an engine exit (see :func:`explain_exit`)."""
    return explain_exit(log_tail, exit_code, signal, kernel_oom=kernel_oom).crash_class
