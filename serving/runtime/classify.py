"""Name why the engine ended, from the last lines it printed and how it exited.

The supervisor hands the tail of the engine's log and its exit status to
:func:`classify_exit`; the class decides how the crash is reported and, later, whether the
recovery policy suspects the hardware. Pure functions over strings: no I/O, so every
signature is tested as a table.

Order matters because one crash prints several signatures: a CUDA fault on one pipeline
rank ends in ``EngineDeadError`` on the API server and gloo "Connection closed by peer" on
the other ranks, so the root cause (the CUDA fault) must win over its consequences.
"""

from __future__ import annotations

import enum
import re
import signal as signal_module
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType


class CrashClass(enum.StrEnum):
    """Why an engine ended, as far as its log and exit status tell."""

    CUDA_FAULT = "cuda_fault"
    ENGINE_DEAD = "engine_dead"
    KV_OOM = "kv_oom"
    DRIVER_POISONED = "driver_poisoned"
    RPC_TIMEOUT = "rpc_timeout"
    UNSUPPORTED_ARCH = "unsupported_arch"
    ALLOCATOR_VMM = "allocator_vmm"
    OOM_KILLED = "oom_killed"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class CrashVerdict:
    """A class with the line that proved it (``None`` when nothing matched) and advice."""

    crash_class: CrashClass
    evidence: str | None
    advice: str


# Lines vLLM prints in normal operation that look alarming; they never decide a class.
_HARMLESS = (
    re.compile(r"No available shared memory broadcast block found in \d+ seconds?"),
    re.compile(r"Failed to import from vllm\._C"),
)

# (class, pattern) in priority order: the first class with a matching line wins.
_SIGNATURES: tuple[tuple[CrashClass, re.Pattern[str]], ...] = (
    (
        CrashClass.DRIVER_POISONED,
        re.compile(
            r"CUDA driver initialization failed"
            r"|cudaErrorDevicesUnavailable"
            r"|\bcuInit\b.*(?:Segmentation fault|SIGSEGV|segfault)"
        ),
    ),
    (
        CrashClass.CUDA_FAULT,
        re.compile(
            r"an illegal memory access was encountered"
            r"|cudaErrorIllegalAddress"
            r"|unspecified launch failure"
            r"|cudaErrorLaunchFailure"
            r"|device-side assert"
        ),
    ),
    # Stock vLLM's DeepSeek V4 kernels (DeepGEMM's hyperconnection) have no sm_80 path:
    # "Assertion error (csrc/apis/hyperconnection.hpp:56): Unsupported architecture".
    (
        CrashClass.UNSUPPORTED_ARCH,
        re.compile(r"Assertion\w*[ (:][^\n]*Unsupported architecture"),
    ),
    # expandable_segments (CUDA VMM) fails on the GA100 CMP at model load with memory free:
    # "cannot map 20 MB with 28.6 GiB free".
    (
        CrashClass.ALLOCATOR_VMM,
        re.compile(r"cannot map \d+(?:\.\d+)? ?[KMGT]i?B with [\d.]+ ?[KMGT]i?B free"),
    ),
    (CrashClass.KV_OOM, re.compile(r"No available memory for the cache blocks")),
    (CrashClass.RPC_TIMEOUT, re.compile(r"RPC call to \w+ timed out")),
    (CrashClass.ENGINE_DEAD, re.compile(r"EngineDeadError|EngineCore failed to start")),
)

# A note from the kernel or the container runtime that memory ran out, wherever it is.
_CGROUP_OOM = re.compile(r"Memory cgroup out of memory|\boom-kill\b|\bOOMKilled\b", re.IGNORECASE)
# Weaker hints that only count together with a SIGKILL exit.
_KILL_HINT = re.compile(r"^\s*Killed\b|\bKilled process\b|\bOut of memory\b", re.IGNORECASE)

# A segfault whose stack (printed on other lines by faulthandler) runs through cuInit.
_SEGFAULT = re.compile(r"Segmentation fault|SIGSEGV|\bsegfault\b", re.IGNORECASE)
_CUINIT = re.compile(r"\bcuInit\b")

_SIGKILL_EXIT_CODE = 128 + signal_module.SIGKILL

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
            "no memory left for the KV cache: lower max_model_len or max_num_seqs, or raise "
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
        CrashClass.UNKNOWN: "no known signature in the log: read the engine log around the exit",
    }
)


def is_harmless(line: str) -> bool:
    """True for log lines vLLM prints in normal operation that must not be taken as faults."""
    return any(pattern.search(line) for pattern in _HARMLESS)


def split_returncode(returncode: int | None) -> tuple[int | None, int | None]:
    """Turn a ``Popen.returncode`` (negative for a signal) into ``(exit_code, signal)``."""
    if returncode is None:
        return None, None
    if returncode < 0:
        return None, -returncode
    return returncode, None


def advice_for(crash_class: CrashClass) -> str:
    """What a person should look at first for ``crash_class``."""
    return _ADVICE[crash_class]


def explain_exit(
    log_tail: Sequence[str], exit_code: int | None, signal: int | None
) -> CrashVerdict:
    """Classify an engine exit and keep the line that decided it.

    ``exit_code`` is the process or container exit status (``None`` when unknown, as for an
    adopted process or a death by signal); ``signal`` the signal that ended a child process.
    A container killed by SIGKILL reports exit code 137, which counts as a SIGKILL.
    """
    lines = [line for line in log_tail if not is_harmless(line)]
    segfault = next((line for line in reversed(lines) if _SEGFAULT.search(line)), None)
    if segfault is not None and any(_CUINIT.search(line) for line in lines):
        crash_class = CrashClass.DRIVER_POISONED
        return CrashVerdict(crash_class, segfault.strip(), _ADVICE[crash_class])
    for crash_class, pattern in _SIGNATURES:
        for line in reversed(lines):
            if pattern.search(line):
                return CrashVerdict(crash_class, line.strip(), _ADVICE[crash_class])
    for line in reversed(lines):
        if _CGROUP_OOM.search(line):
            return CrashVerdict(CrashClass.OOM_KILLED, line.strip(), _ADVICE[CrashClass.OOM_KILLED])
    killed = signal == signal_module.SIGKILL or exit_code == _SIGKILL_EXIT_CODE
    if killed:
        for line in reversed(lines):
            if _KILL_HINT.search(line):
                return CrashVerdict(
                    CrashClass.OOM_KILLED, line.strip(), _ADVICE[CrashClass.OOM_KILLED]
                )
    return CrashVerdict(CrashClass.UNKNOWN, None, _ADVICE[CrashClass.UNKNOWN])


def classify_exit(log_tail: Sequence[str], exit_code: int | None, signal: int | None) -> CrashClass:
    """The :class:`CrashClass` of an engine exit (see :func:`explain_exit`)."""
    return explain_exit(log_tail, exit_code, signal).crash_class
