"""Every crash class from the messages the real programs print, with their sources (issue 44).

Each row is a message as vLLM, torch, NCCL, gloo, the CUDA runtime, the kernel or a shell
prints it, with where it comes from (the program's source, or the public issue that pasted
it). Every class has at least three rows from different sources; the near-misses below
must not take the class their wording brushes against.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

import pytest

from serving.runtime.classify import CrashClass, advice_for, explain_exit

C = CrashClass
NOISE = [
    "INFO 09-29 13:45:55 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s",
    'INFO:     127.0.0.1:50000 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
]
TORCH_HINTS = [
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
]
OOM_RECORD = (
    "Out of memory: Killed process 4242 (python3) total-vm:81234567kB, anon-rss:61234567kB, "
    "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:123456kB oom_score_adj:0"
)
MEMCG_SUMMARY = (
    "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=docker-ab12.scope,"
    "mems_allowed=0,oom_memcg=/system.slice/docker-ab12.scope,"
    "task_memcg=/system.slice/docker-ab12.scope,task=python3,pid=4242,uid=0"
)


@dataclass(frozen=True)
class Case:
    """A real message (the tail's decisive lines), how the engine ended, and its source."""

    crash_class: CrashClass
    lines: tuple[str, ...]
    source: str
    exit_code: int | None = 1
    sig: int | None = None
    kernel_oom: str | None = None


CASES = [
    # cuda_fault
    Case(C.CUDA_FAULT, ("torch.AcceleratorError: CUDA error: an illegal memory access was "
         "encountered", *TORCH_HINTS), "torch c10/cuda/CUDAException.cpp; vLLM V1 traces"),
    Case(C.CUDA_FAULT, ("../aten/src/ATen/native/cuda/Indexing.cu:1255: indexSelectLargeIndex: "
         "block: [0,0,0], thread: [0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
         "RuntimeError: CUDA error: device-side assert triggered", *TORCH_HINTS),
         "ATen device-side assert (cudaErrorAssert)"),
    Case(C.CUDA_FAULT, ("torch.distributed.DistBackendError: NCCL error in: "
         "/pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, unhandled cuda error (run "
         "with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",),
         "torch ProcessGroupNCCL / NCCLUtils.hpp"),
    Case(C.CUDA_FAULT, ("misc/strongstream.cc:395 NCCL WARN Cuda failure 700 'an illegal "
         "memory access was encountered'",), "NCCL src/include/checks.h (CUDACHECK)"),
    Case(C.CUDA_FAULT, ("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling "
         "`cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16BF, lda, b, "
         "CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, CUDA_R_32F, "
         "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`",), "torch aten/src/ATen/cuda/CUDABlas.cpp"),
    # driver_poisoned
    Case(C.DRIVER_POISONED, ("RuntimeError: CUDA error: all CUDA-capable devices are busy or "
         "unavailable", *TORCH_HINTS),
         "CUDA <= 11 cudaErrorDevicesUnavailable; facebookresearch/detectron2#2580"),
    Case(C.DRIVER_POISONED, ("torch.AcceleratorError: CUDA error: CUDA-capable device(s) "
         "is/are busy or unavailable", *TORCH_HINTS,
         "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
         "proc(s): {}"), "CUDA 12 cudaErrorDevicesUnavailable; hiyouga/LlamaFactory#10240"),
    Case(C.DRIVER_POISONED, ("RuntimeError: CUDA driver initialization failed, you might not "
         "have a CUDA gpu.",), "torch c10/cuda/CUDAFunctions.cpp"),
    Case(C.DRIVER_POISONED, ("RuntimeError: CUDA unknown error - this may be due to an "
         "incorrectly set up environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after "
         "program start. Setting the available devices to be zero.",),
         "torch c10/cuda/CUDAFunctions.cpp (cudaErrorUnknown at init)"),
    # kv_oom
    Case(C.KV_OOM, ("ValueError: The model's max seq len (29000) is larger than the maximum "
         "number of tokens that can be stored in KV cache (23648). Try increasing "
         "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
         "RuntimeError: Engine process failed to start. See stack trace for the root cause."),
         "vLLM worker/worker.py (raise_if_cache_size_invalid); vllm-project/vllm#10517"),
    Case(C.KV_OOM, ("(EngineCore_DP0 pid=18799) ERROR 10-08 20:33:48 [core.py:708] ValueError: "
         "To serve at least one request with the models's max seq len (40960), (5.62 GiB KV "
         "cache is needed, which is larger than the available KV cache memory (4.50 GiB). Based "
         "on the available memory, the estimated maximum model length is 32768. Try increasing "
         "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
         "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."),
         "vLLM v1/core/kv_cache_utils.py (check_enough_kv_cache_memory)"),
    Case(C.KV_OOM, ("ValueError: No available memory for the cache blocks. Try increasing "
         "`gpu_memory_utilization` when initializing the engine.",
         "ERROR 09-29 [core.py:586] EngineCore failed to start."),
         "vLLM v1/core/kv_cache_utils.py, worker (determine_num_available_blocks)"),
    # allocator_vmm
    Case(C.ALLOCATOR_VMM, ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
         "20.00 MiB. GPU 0 has a total capacity of 39.39 GiB of which 28.62 GiB is free. "
         "Including non-PyTorch memory, this process has 10.75 GiB memory in use. Of the "
         "allocated memory 9.80 GiB is allocated by PyTorch, and 0.40 GiB is reserved by "
         "PyTorch but unallocated.",
         "If reserved but unallocated memory is large try setting "
         "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."),
         "torch c10/cuda/CUDACachingAllocator.cpp OOM message (small allocation, GiBs free)"),
    Case(C.ALLOCATOR_VMM, ("RuntimeError: CUDA driver error: unknown error",
         "frame #3: c10::cuda::CUDACachingAllocator::Native::(anonymous namespace)::"
         "ExpandableSegment::map(c10::cuda::CUDACachingAllocator::SegmentRange) + 0x3f2"),
         "torch C10_CUDA_DRIVER_CHECK in ExpandableSegment; pytorch/pytorch#192330"),
    Case(C.ALLOCATOR_VMM, ("INFO 09-29 [env] PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
         "RuntimeError: CUDA driver error: out of memory"),
         "torch ExpandableSegment cuMemSetAccess OOM; pytorch/pytorch#188008"),
    Case(C.ALLOCATOR_VMM, ("(Worker_PP0 pid=9) RuntimeError: cannot map 20 MB with 28.6 GiB "
         "free",), "field report on the GA100 CMP (seeds)"),
    # checkpoint
    Case(C.CHECKPOINT, ("(Worker_PP2 pid=3120) ERROR 12-06 [multiproc_executor.py:597] "
         "safetensors_rust.SafetensorError: Error while deserializing header: incomplete "
         "metadata, file not fully covered",
         "(EngineCore_0 pid=3117) ERROR 12-06 [core.py:708] EngineCore failed to start.",
         "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
         "proc(s): {}"),
         "safetensors >= 0.6 Display of MetadataIncompleteBuffer under vLLM's worker"),
    Case(C.CHECKPOINT, ("ERROR 12-19 01:22:33 engine.py:366] safetensors_rust.SafetensorError: "
         "Error while deserializing header: MetadataIncompleteBuffer",
         "RuntimeError: Engine process failed to start. See stack trace for the root cause."),
         "safetensors < 0.6 under vLLM's v0 engine; gpustack/gpustack#815"),
    Case(C.CHECKPOINT, ("(Worker_PP0 pid=88) ERROR [multiproc_executor.py:597]     with "
         'safe_open(st_file, framework="pt") as f:',
         "(Worker_PP0 pid=88) ERROR [multiproc_executor.py:597] safetensors_rust.SafetensorError: "
         "Error while deserializing header: HeaderTooLarge"),
         "safetensors HeaderTooLarge: a git-lfs pointer cloned in place of the shard"),
    # cuda_oom
    Case(C.CUDA_OOM, ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
         "GPU 0 has a total capacity of 23.69 GiB of which 1.06 GiB is free. Process 4242 has "
         "22.62 GiB memory in use.",), "torch >= 2.1 CUDACachingAllocator.cpp"),
    Case(C.CUDA_OOM, ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate "
         "2.00 MiB (GPU 0; 23.69 GiB total capacity; 22.50 GiB already allocated; 1.19 MiB "
         "free; 22.84 GiB reserved in total by PyTorch)",), "torch < 2.1 CUDACachingAllocator"),
    Case(C.CUDA_OOM, ("RuntimeError: CUDA error: out of memory", *TORCH_HINTS),
         "CUDA runtime cudaErrorMemoryAllocation"),
    # torch's "unhandled cuda error" first, NCCL's own line naming the failure after it.
    Case(C.CUDA_OOM, ("torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/"
         "distributed/c10d/ProcessGroupNCCL.cpp:3356, unhandled cuda error (run with "
         "NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
         "ncclUnhandledCudaError: Call to CUDA function failed.", "Last error:",
         "Cuda failure 2 'out of memory'"),
         "NCCL src/include/checks.h CUDACHECK under torch ProcessGroupNCCL"),
    # rpc_timeout
    Case(C.RPC_TIMEOUT, ("TimeoutError: RPC call to sample_tokens timed out.",
         "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."),
         "vLLM v1/executor/multiproc_executor.py (collective_rpc)"),
    Case(C.RPC_TIMEOUT, ("[rank1]:[E1206 04:40:02.123456 ProcessGroupNCCL.cpp:632] [Rank 1] "
         "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=14, OpType=ALLREDUCE, "
         "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600041 milliseconds before timing "
         "out.",), "torch csrc/distributed/c10d/ProcessGroupNCCL.cpp (watchdog)"),
    Case(C.RPC_TIMEOUT, ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/"
         "unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete",),
         "gloo transport/tcp/unbound_buffer.cc"),
    # unsupported_arch
    Case(C.UNSUPPORTED_ARCH, ("(EngineCore_DP0 pid=7) Assertion error "
         "(csrc/apis/hyperconnection.hpp:56): Unsupported architecture",
         "RuntimeError: Engine core initialization failed. See root cause above."),
         "DeepGEMM csrc/apis/hyperconnection.hpp (seeds: stock vLLM, DeepSeek V4, sm_80)"),
    Case(C.UNSUPPORTED_ARCH, ("RuntimeError: CUDA error: no kernel image is available for "
         "execution on the device", *TORCH_HINTS),
         "CUDA runtime cudaErrorNoKernelImageForDevice"),
    Case(C.UNSUPPORTED_ARCH, ("ValueError: The quantization method fp8 is not supported for "
         "the current GPU. Minimum capability: 89. Current capability: 80.",),
         "vLLM config (quantization capability check)"),
    # engine_dead
    Case(C.ENGINE_DEAD, ("ValueError: Failed to advance FSM for request chatcmpl-1",
         "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
         "stack trace (above) for the root cause."), "vLLM v1/engine/exceptions.py"),
    Case(C.ENGINE_DEAD, ("RuntimeError: Engine core initialization failed. See root cause "
         "above. Failed core proc(s): {}",), "vLLM v1/engine/utils.py (wait_for_engine_startup)"),
    Case(C.ENGINE_DEAD, ("ERROR 10-08 20:33:48 [core.py:708] EngineCore failed to start.",),
         "vLLM v1/engine/core.py (run_engine_core)"),
    Case(C.ENGINE_DEAD, ("vllm.engine.async_llm_engine.AsyncEngineDeadError: Background loop "
         "has errored already.",), "vLLM v0 engine/async_llm_engine.py"),
    # oom_killed: the kernel's word (looked up by pid) or the runtime's in the log
    Case(C.OOM_KILLED, ("bash: line 1:  4242 Killed                  vllm serve /models/x",),
         "Linux mm/oom_kill.c (global OOM killer)", exit_code=137, kernel_oom=OOM_RECORD),
    Case(C.OOM_KILLED, (), "Linux mm/oom_kill.c (dump_oom_summary, memcg)", exit_code=None,
         sig=signal.SIGKILL, kernel_oom=MEMCG_SUMMARY),
    Case(C.OOM_KILLED, ("Memory cgroup out of memory: Killed process 4242 (python3) "
         "total-vm:812345kB",), "Linux mm/oom_kill.c (memcg), copied into the log", exit_code=137),
    Case(C.OOM_KILLED, ("fleetd: container vllm-test was OOMKilled (exit 137)",),
         "Docker State.OOMKilled, through the container launcher", exit_code=137),
    # killed: SIGKILL without the kernel's OOM record
    Case(C.KILLED, ("bash: line 1:  4242 Killed                  vllm serve /models/x",),
         "bash jobs.c (strsignal(SIGKILL)), exit status 137", exit_code=137),
    Case(C.KILLED, (), "POSIX: Popen.returncode -9", exit_code=None, sig=signal.SIGKILL),
    Case(C.KILLED, ("INFO 09-29 [api_server.py:1024] Starting vLLM API server on "
         "http://0.0.0.0:8000",), "docker run exit status 128+9", exit_code=137),
    # unknown, with the first error quoted: never a hardware class
    Case(C.UNKNOWN, ("Traceback (most recent call last):", "ModuleNotFoundError: No module named "
         "'vllm'",), "CPython import system"),
    Case(C.UNKNOWN, ("usage: vllm serve [model_tag] [options]", "vllm serve: error: unrecognized "
         "arguments: --max-model-lenn 4096"), "argparse (vLLM's CLI)", exit_code=2),
    Case(C.UNKNOWN, ("huggingface_hub.errors.HFValidationError: Repo id must be in the form "
         "'repo_name' or 'namespace/repo_name': '/models/missing'. Use `repo_type` argument if "
         "needed.",), "huggingface_hub utils/_validators.py (a missing local model path)"),
    # A software error in vLLM's custom all-reduce: quoted, not called a card fault.
    Case(C.UNKNOWN, ("Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:368 'invalid "
         "argument'",), "vLLM csrc/custom_all_reduce.cuh (CUDACHECK)"),
]  # fmt: skip


def _tail(case: Case) -> list[str]:
    return [*NOISE, *case.lines, *NOISE]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.crash_class}-{n}" for n, c in enumerate(CASES)])
def test_each_real_message_takes_its_class(case: Case) -> None:
    verdict = explain_exit(_tail(case), case.exit_code, case.sig, kernel_oom=case.kernel_oom)
    assert verdict.crash_class is case.crash_class, (case.source, verdict)
    assert verdict.advice == advice_for(case.crash_class)
    if case.crash_class is not C.KILLED and (case.lines or case.kernel_oom):
        assert verdict.evidence  # the line that decided (or the first error, for unknown)


def test_every_class_has_three_messages_from_different_sources() -> None:
    for crash_class in CrashClass:
        sources = {case.source for case in CASES if case.crash_class is crash_class}
        assert len(sources) >= 3, crash_class


def test_unknown_quotes_the_first_error_line() -> None:
    tail = [
        *NOISE,
        "Traceback (most recent call last):",
        '  File "/opt/vllm/vllm/entrypoints/cli/main.py", line 7, in <module>',
        "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
        "During handling of the above exception, another exception occurred:",
        "RuntimeError: Failed to load the engine",
    ]
    verdict = explain_exit(tail, 1, None)
    assert verdict.crash_class is C.UNKNOWN
    assert verdict.evidence == tail[4]


@pytest.mark.parametrize(
    ("lines", "exit_code", "expected"),
    [
        # torch's hints after an error never decide: the error above them does
        ((*TORCH_HINTS,), 1, C.UNKNOWN),
        (("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable",
          *TORCH_HINTS), 1, C.DRIVER_POISONED),
        # torch's OOM hint names expandable_segments: a real OOM stays a real OOM
        (("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
          "total capacity of 39.39 GiB of which 512.00 MiB is free.",
          "If reserved but unallocated memory is large try setting "
          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."),
         1, C.CUDA_OOM),
        # a CUDA driver error with nothing pointing at the allocator's VMM path
        (("RuntimeError: CUDA driver error: invalid argument",), 1, C.CUDA_FAULT),
        # a passing mention decides nothing
        (("WARNING flashinfer: Unsupported architecture sm_80, using the fallback",), 1, C.UNKNOWN),
        (("INFO 09-29 [kv_cache_utils.py:716] GPU KV cache size: 52,288 tokens",
          "INFO 09-29 [kv_cache_utils.py:720] Maximum concurrency for 29000 tokens per "
          "request: 0.82x"), 1, C.UNKNOWN),
        (("Killed",), 1, C.UNKNOWN),
        # import errors and missing libraries name CUDA but are the recipe's, not the card's
        (("ImportError: libcudart.so.12: cannot open shared object file: No such file or "
          "directory",), 1, C.UNKNOWN),
        (("OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA "
          "install root.",), 1, C.UNKNOWN),
    ],
)  # fmt: skip
def test_near_misses(lines: tuple[str, ...], exit_code: int, expected: CrashClass) -> None:
    assert explain_exit([*NOISE, *lines], exit_code, None).crash_class is expected


def test_an_oom_record_for_another_pid_is_not_ours() -> None:
    """The lookup is by the engine's pid: the caller passes no record, so it is ``killed``."""
    from hwcheck.kernellog.oom import oom_kill_record

    record = OOM_RECORD.replace("4242", "999")
    assert oom_kill_record([record, MEMCG_SUMMARY.replace("4242", "77")], {4242}) is None
    assert oom_kill_record([record, OOM_RECORD], {4242}) == OOM_RECORD
    assert oom_kill_record([MEMCG_SUMMARY], {4242}) == MEMCG_SUMMARY
    assert explain_exit(NOISE, 137, None, kernel_oom=None).crash_class is C.KILLED


def test_a_cause_in_a_60_line_traceback_wins_over_the_last_frame() -> None:
    """A crash while loading: the first error, 60 lines up, over the start failure below."""
    frames = [
        f'  File "/opt/vllm/vllm/model_executor/layer_{n}.py", line {n}, in forward'
        for n in range(58)
    ]
    tail = [
        "(EngineCore_DP0 pid=7) ValueError: No available memory for the cache blocks. Try "
        "increasing `gpu_memory_utilization` when initializing the engine.",
        "Traceback (most recent call last):",
        *frames,
        "RuntimeError: Engine core initialization failed. See root cause above.",
    ]
    verdict = explain_exit(tail, 1, None)
    assert (verdict.crash_class, verdict.evidence) == (C.KV_OOM, tail[0])
    assert "max_model_len" in verdict.advice and "gpu_memory_utilization" in verdict.advice


def test_the_first_cause_wins_over_a_later_one() -> None:
    tail = [
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
        *TORCH_HINTS,
        "RuntimeError: CUDA error: unspecified launch failure",
    ]
    assert explain_exit(tail, 1, None).evidence == tail[0]


def test_hints_on_the_errors_own_line_are_cut_not_the_error() -> None:
    """A repr can carry the error and torch's hints on one line: the error still decides."""
    line = (
        "RuntimeError('CUDA error: all CUDA-capable devices are busy or unavailable\\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.\\nCompile with `TORCH_USE_CUDA_DSA` to enable "
        "device-side assertions.\\n')"
    )
    assert explain_exit([line], 1, None).crash_class is C.DRIVER_POISONED
    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 39.39 GiB of which 512.00 MiB is free. If reserved but unallocated "
        "memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
        "fragmentation."
    )
    assert (
        explain_exit([oom, "RuntimeError: CUDA driver error: out of memory"], 1, None).crash_class
        is C.CUDA_OOM
    )
