"""Why an engine ended: the crash classes, declared once.

``serving.runtime.classify`` re-exports them; the recovery policy, the status, the API
and the crash black box read them.
"""

from __future__ import annotations

import enum


class CrashClass(enum.StrEnum):
    """Why an engine ended, as far as its log, its exit status and the kernel log tell."""

    CUDA_FAULT = "cuda_fault"
    ENGINE_DEAD = "engine_dead"
    KV_OOM = "kv_oom"
    DRIVER_POISONED = "driver_poisoned"
    RPC_TIMEOUT = "rpc_timeout"
    UNSUPPORTED_ARCH = "unsupported_arch"
    ALLOCATOR_VMM = "allocator_vmm"
    OOM_KILLED = "oom_killed"
    CUDA_OOM = "cuda_oom"
    CHECKPOINT = "checkpoint"
    KILLED = "killed"
    UNKNOWN = "unknown"
