"""The crash signatures: what vLLM, torch, NCCL and the CUDA runtime really print, by class.

Each signature names its class, its strength and where the message comes from (the
program's source, or the issue where owners pasted it; docs/domain.md "Crash signatures"
lists them with their origins). ``classify.explain_exit`` picks the strongest signature
in the tail and, among equals, the first: the root cause prints before its consequences.

Strength:

- ``CAUSE``: the error names why the engine died (a CUDA fault, a KV-cache sizing error).
- ``SYMPTOM``: a worker stopped answering: true, but often the echo of a cause elsewhere.
- ``CONSEQUENCE``: the engine core died or did not start; the cause is printed above it.

torch's boilerplate after every CUDA error ("CUDA kernel errors might be asynchronously
reported", "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions") and its
OOM hint ("try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True") are ``HINTS``:
cut out before matching, so they never outweigh the error line above them.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from serving.runtime.crash_class import CrashClass


class Strength(enum.IntEnum):
    """How much a signature says about the cause (higher wins)."""

    CONSEQUENCE = 1
    SYMPTOM = 2
    CAUSE = 3


@dataclass(frozen=True, slots=True)
class Signature:
    """One message family: its class, strength and origin."""

    crash_class: CrashClass
    pattern: re.Pattern[str]
    strength: Strength
    source: str


# Lines that never decide a class: vLLM's routine warnings and torch's boilerplate hints.
HARMLESS: tuple[re.Pattern[str], ...] = (
    # vLLM distributed/device_communicators/shm_broadcast.py: a wait, not a fault.
    re.compile(r"No available shared memory broadcast block found in \d+ seconds?"),
    # vLLM _custom_ops.py: the C extension import fallback warning.
    re.compile(r"Failed to import from vllm\._C"),
)
# Each hint is cut out of its line (a repr may carry the error and its hints on one line);
# a line left empty is dropped.
HINTS: tuple[re.Pattern[str], ...] = (
    # torch c10/cuda/CUDAException.cpp (c10_cuda_check_implementation) appends these.
    re.compile(
        r"CUDA kernel errors might be asynchronously reported at some other API call,?"
        r"(?: so the stacktrace below might be incorrect\.?)?"
    ),
    re.compile(r"For debugging consider passing CUDA_LAUNCH_BLOCKING=1\.?"),
    re.compile(r"Compile with `?TORCH_USE_CUDA_DSA`? to enable device-side assertions\.?"),
    # torch c10/cuda/CUDACachingAllocator.cpp: the OOM message's own suggestion.
    re.compile(
        r"If reserved but unallocated memory is large try setting "
        r"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True(?: to avoid fragmentation\.?)?"
    ),
)

_CAUSE, _SYMPTOM, _CONSEQUENCE = Strength.CAUSE, Strength.SYMPTOM, Strength.CONSEQUENCE

SIGNATURES: tuple[Signature, ...] = (
    # cudaErrorDevicesUnavailable: "all CUDA-capable devices are busy or unavailable" (CUDA
    # <= 11), "CUDA-capable device(s) is/are busy or unavailable" (CUDA 12+); seen after
    # an Xid 31 on these cards (docs/domain.md "Wedges and what must never be done").
    Signature(
        CrashClass.DRIVER_POISONED,
        re.compile(
            r"all CUDA-capable devices are busy or unavailable"
            r"|CUDA-capable device\(s\) is/are busy or unavailable"
            r"|cudaErrorDevicesUnavailable"
        ),
        _CAUSE,
        "CUDA runtime cudaGetErrorString(cudaErrorDevicesUnavailable); "
        "AUTOMATIC1111/stable-diffusion-webui#2986, hiyouga/LlamaFactory#10240",
    ),
    # torch c10/cuda (CUDAFunctions.cpp device_count_impl): cudaErrorInitializationError and
    # cudaErrorUnknown at init; the driver needs a reload or a reboot.
    Signature(
        CrashClass.DRIVER_POISONED,
        re.compile(
            r"CUDA driver initialization failed"
            r"|CUDA unknown error - this may be due to an incorrectly set up environment"
        ),
        _CAUSE,
        "torch c10/cuda/CUDAFunctions.cpp (device_count_impl)",
    ),
    # DeepGEMM's assert, and the CUDA runtime's cudaErrorNoKernelImageForDevice; vLLM's
    # quantization capability check.
    Signature(
        CrashClass.UNSUPPORTED_ARCH,
        re.compile(
            r"Assertion\w*[ (:][^\n]*Unsupported architecture"
            r"|no kernel image is available for execution on the device"
            r"|cudaErrorNoKernelImageForDevice"
            r"|is not supported for the current GPU\. Minimum capability: \d+"
        ),
        _CAUSE,
        "DeepGEMM csrc/apis/hyperconnection.hpp (seeds); CUDA runtime "
        "cudaErrorNoKernelImageForDevice; vLLM model_executor/layers/quantization "
        "(verify_quantization: 'Minimum capability')",
    ),
    # vLLM's KV-cache sizing errors: v1 core/kv_cache_utils.py (check_enough_kv_cache_memory)
    # and the older worker (raise_if_cache_size_invalid, determine_num_available_blocks).
    Signature(
        CrashClass.KV_OOM,
        re.compile(
            r"No available memory for the cache blocks"
            r"|max seq len \(\d+\) is larger than the maximum number of tokens that can be "
            r"stored in KV cache"
            r"|KV cache is needed, which is larger than the available KV cache memory"
        ),
        _CAUSE,
        "vLLM v1/core/kv_cache_utils.py, worker/worker.py; vllm-project/vllm#10517, #11391",
    ),
    # safetensors' header errors (safetensors/src/tensor.rs, SafeTensorError's Display): a
    # shard cut short reads "MetadataIncompleteBuffer" before safetensors 0.6 and "incomplete
    # metadata, file not fully covered" since; a shard that is not safetensors at all
    # "HeaderTooLarge"/"HeaderTooSmall"/"InvalidHeader...". vLLM prints it from a worker's
    # weight iterator (model_loader/weight_utils.py safetensors_weights_iterator).
    Signature(
        CrashClass.CHECKPOINT,
        re.compile(
            r"SafetensorError: Error while deserializing header"
            r"|MetadataIncompleteBuffer"
            r"|incomplete metadata, file not fully covered"
        ),
        _CAUSE,
        "safetensors src/tensor.rs (SafeTensorError: MetadataIncompleteBuffer, 'incomplete "
        "metadata, file not fully covered'); vLLM model_loader/weight_utils.py; "
        "gpustack/gpustack#815, PersuGPT/PersuGPT.github.io#2",
    ),
    # The product's own words for the GA100 CMP's CUDA VMM failure (seeds).
    Signature(
        CrashClass.ALLOCATOR_VMM,
        re.compile(r"cannot map \d+(?:\.\d+)? ?[KMGT]i?B with [\d.]+ ?[KMGT]i?B free"),
        _CAUSE,
        "field reports of expandable_segments on the GA100 CMP (seeds)",
    ),
    Signature(
        CrashClass.CUDA_FAULT,
        re.compile(
            r"an illegal memory access was encountered"
            r"|cudaErrorIllegalAddress"
            r"|unspecified launch failure"
            r"|cudaErrorLaunchFailure"
            r"|device-side assert(?:ion)? triggered"
            r"|an illegal instruction was encountered"
            r"|misaligned address"
            r"|uncorrectable ECC error encountered"
            r"|CUBLAS_STATUS_EXECUTION_FAILED"
            r"|Cuda failure (?:\d+ )?'(?!out of memory')"
        ),
        _CAUSE,
        "CUDA runtime cudaGetErrorString via torch c10/cuda/CUDAException.cpp; ATen's "
        "device-side assert; cuBLAS status; NCCL src/include/checks.h ('Cuda failure')",
    ),
    # torch's ProcessGroupNCCL says a CUDA call failed; NCCL's own "Cuda failure 'X'" line
    # (NCCL_DEBUG, or the "Last error:" lines torch appends) names which: that line decides
    # (an 'out of memory' there is memory, not a card fault); alone, it is a CUDA fault.
    Signature(
        CrashClass.CUDA_FAULT,
        re.compile(r"unhandled cuda error"),
        _SYMPTOM,
        "torch csrc/distributed/c10d/NCCLUtils.hpp, ProcessGroupNCCL ('unhandled cuda error')",
    ),
    # The CUDA runtime's cudaErrorMemoryAllocation through torch's CUDA check or NCCL's.
    Signature(
        CrashClass.CUDA_OOM,
        re.compile(r"CUDA error: out of memory|Cuda failure (?:\d+ )?'out of memory'"),
        _CAUSE,
        "CUDA runtime cudaGetErrorString(cudaErrorMemoryAllocation) via torch c10/cuda and "
        "NCCL src/include/checks.h (CUDACHECK: \"Cuda failure 2 'out of memory'\")",
    ),
    # vLLM v1 executor/multiproc_executor.py collective_rpc; torch ProcessGroupNCCL's
    # watchdog; gloo's transport (tcp/unbound_buffer.cc) on pipeline ranks.
    Signature(
        CrashClass.RPC_TIMEOUT,
        re.compile(
            r"RPC call to \w+ timed out"
            r"|Watchdog caught collective operation timeout"
            r"|Timed out waiting \d+ ?ms for (?:recv|send) operation to complete"
        ),
        _SYMPTOM,
        "vLLM v1/executor/multiproc_executor.py; torch csrc/distributed/c10d/ProcessGroupNCCL.cpp; "
        "gloo transport/tcp/unbound_buffer.cc",
    ),
    # vLLM v1 engine/exceptions.py, engine/core.py, engine/utils.py (wait_for_engine_startup).
    Signature(
        CrashClass.ENGINE_DEAD,
        re.compile(
            r"EngineDeadError"
            r"|EngineCore failed to start"
            r"|Engine core initialization failed"
            r"|Engine process failed to start"
            r"|AsyncEngineDeadError"
        ),
        _CONSEQUENCE,
        "vLLM v1/engine/exceptions.py, v1/engine/core.py, v1/engine/utils.py; "
        "engine/multiprocessing (v0)",
    ),
)

# torch's OOM: "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity
# of 79.15 GiB of which 28.62 GiB is free." (torch >= 2.1), or "... (GPU 0; 23.69 GiB total
# capacity; ...; 1.19 MiB free; ...)" (older); c10/cuda/CUDACachingAllocator.cpp.
TORCH_OOM = re.compile(r"CUDA out of memory\. Tried to allocate (?P<want>[\d.]+ ?[KMGT]?i?B)")
TORCH_FREE = re.compile(
    r"of which (?P<free>[\d.]+ ?[KMGT]?i?B) is free|(?P<old>[\d.]+ ?[KMGT]?i?B) free;"
)
# torch's C10_CUDA_DRIVER_CHECK ("CUDA driver error: ..."), raised by the caching allocator's
# ExpandableSegment (cuMemCreate, cuMemMap, cuMemSetAccess); pytorch/pytorch#192330, #188008.
DRIVER_ERROR = re.compile(r"CUDA driver error: ")
VMM_CONTEXT = re.compile(r"ExpandableSegment|PYTORCH_CUDA_ALLOC_CONF=\S*expandable_segments:True")

# The kernel's or the container runtime's word that memory ran out, in the engine's log.
CGROUP_OOM = re.compile(
    r"Memory cgroup out of memory|\boom-kill\b|\bOOMKilled\b|Out of memory: Killed process",
    re.IGNORECASE,
)

# The first error line of a tail, quoted when nothing else decides: a Python exception,
# argparse's "prog: error: ...", or a fatal signal report.
FIRST_ERROR = re.compile(
    r"\b[A-Za-z_][\w.]*(?:Error|Exception|Exit)\b:"
    r"|: error: "
    r"|Fatal Python error:"
    r"|\bFailed: Cuda error "  # vLLM csrc/custom_all_reduce.cuh's CUDACHECK
)
# Else the first line logged at ERROR level (vLLM's "ERROR 10-08 20:33:48 [core.py:708] ...").
LOGGED_ERROR = re.compile(r"\bERROR\b")

# A segfault whose stack (printed on other lines by faulthandler) runs through cuInit.
SEGFAULT = re.compile(r"Segmentation fault|SIGSEGV|\bsegfault\b", re.IGNORECASE)
CUINIT = re.compile(r"\bcuInit\b")
