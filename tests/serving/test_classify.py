"""Crash classification: one row per signature seen in rig logs, plus priority and noise."""

from __future__ import annotations

import signal

import pytest

from serving.runtime.classify import (
    CrashClass,
    advice_for,
    classify_exit,
    explain_exit,
    is_harmless,
    split_returncode,
)
from serving.sim.core import crash_trace
from serving.sim.options import CRASH_KINDS

NOISE = [
    "INFO 09-29 13:45:55 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s",
    'INFO:     127.0.0.1:50000 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda_fault"),
        ("torch.AcceleratorError: CUDA error: ... (cudaErrorIllegalAddress)", "cuda_fault"),
        ("RuntimeError: CUDA error: unspecified launch failure", "cuda_fault"),
        (
            "../aten/src/ATen/native/cuda/Indexing.cu:1255: block: [0,0,0] device-side assert "
            "triggered",
            "cuda_fault",
        ),
        (
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
            "engine_dead",
        ),
        ("RuntimeError: EngineCore failed to start.", "engine_dead"),
        (
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization`",
            "kv_oom",
        ),
        (
            "RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.",
            "driver_poisoned",
        ),
        ("TimeoutError: RPC call to sample_tokens timed out.", "rpc_timeout"),
        ("Memory cgroup out of memory: Killed process 4242 (python3)", "oom_killed"),
        # Stock vLLM with DeepSeek V4 on these cards (seeds).
        (
            "Assertion error (csrc/apis/hyperconnection.hpp:56): Unsupported architecture",
            "unsupported_arch",
        ),
        # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True on the GA100 CMP (seeds).
        ("RuntimeError: cannot map 20 MB with 28.6 GiB free", "allocator_vmm"),
    ],
)
def test_each_signature_names_its_class(line: str, expected: str) -> None:
    assert classify_exit([*NOISE, line, *NOISE], exit_code=1, signal=None) == CrashClass(expected)


def test_cuda_fault_wins_over_the_engine_dead_and_gloo_lines_it_causes() -> None:
    tail = [
        "(Worker_PP2 pid=12) RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed "
        "by peer [127.0.0.1]:51234",
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
    ]
    verdict = explain_exit(tail, exit_code=1, signal=None)
    assert verdict.crash_class is CrashClass.CUDA_FAULT
    assert verdict.evidence == tail[1]
    assert "chase the Xid" in verdict.advice
    assert "Connection closed by peer" in verdict.advice


@pytest.mark.parametrize(
    ("root", "advice"),
    [
        (
            "(EngineCore_DP0 pid=7) Assertion error (csrc/apis/hyperconnection.hpp:56): "
            "Unsupported architecture",
            "run the sm_80 fork",
        ),
        ("(Worker_PP0 pid=9) RuntimeError: cannot map 20 MB with 28.6 GiB free", "remove"),
    ],
)
def test_the_seeds_load_failures_win_over_the_start_failure_they_cause(
    root: str, advice: str
) -> None:
    tail = [*NOISE, root, "RuntimeError: EngineCore failed to start.", *NOISE]
    verdict = explain_exit(tail, exit_code=1, signal=None)
    assert verdict.evidence == root
    assert advice in verdict.advice
    if "cannot map" in root:
        assert "expandable_segments" in verdict.advice


def test_a_passing_mention_of_an_architecture_decides_nothing() -> None:
    tail = ["WARNING flashinfer: Unsupported architecture sm_80, using the fallback", "Killed"]
    assert classify_exit(tail, exit_code=1, signal=None) is CrashClass.UNKNOWN


def test_kv_oom_wins_over_the_engine_core_start_failure() -> None:
    tail = [
        "ValueError: No available memory for the cache blocks.",
        "RuntimeError: EngineCore failed to start.",
    ]
    assert classify_exit(tail, exit_code=1, signal=None) is CrashClass.KV_OOM


def test_segfault_in_cuinit_is_a_poisoned_driver() -> None:
    tail = [
        "Fatal Python error: Segmentation fault",
        '  File "/usr/lib/python3/torch/cuda/__init__.py", line 319 in _lazy_init',
        "  libcuda.so.1(cuInit+0x4d)",
    ]
    assert classify_exit(tail, exit_code=None, signal=signal.SIGSEGV) is CrashClass.DRIVER_POISONED


def test_a_segfault_elsewhere_is_not_a_poisoned_driver() -> None:
    tail = ["Fatal Python error: Segmentation fault", '  File "tokenizer.py", line 3 in encode']
    assert classify_exit(tail, exit_code=None, signal=signal.SIGSEGV) is CrashClass.UNKNOWN


@pytest.mark.parametrize(
    "harmless",
    [
        "WARNING 09-29 [shm_broadcast.py:466] No available shared memory broadcast block found "
        "in 60 seconds. This typically happens when some processes are hanging.",
        "WARNING 09-29 [_custom_ops.py:20] Failed to import from vllm._C with "
        "ModuleNotFoundError(\"No module named 'vllm._C'\")",
    ],
)
def test_known_harmless_lines_never_decide(harmless: str) -> None:
    assert is_harmless(harmless)
    assert classify_exit([harmless, *NOISE], exit_code=1, signal=None) is CrashClass.UNKNOWN


def test_harmless_line_does_not_hide_a_real_signature_next_to_it() -> None:
    tail = [
        "No available shared memory broadcast block found in 60 seconds",
        "TimeoutError: RPC call to sample_tokens timed out.",
    ]
    assert classify_exit(tail, exit_code=1, signal=None) is CrashClass.RPC_TIMEOUT


def test_outside_sigkill_without_a_hint_is_killed() -> None:
    assert classify_exit(NOISE, exit_code=None, signal=signal.SIGKILL) is CrashClass.KILLED


@pytest.mark.parametrize(
    ("exit_code", "sig"), [(None, signal.SIGKILL), (137, None)], ids=["signal", "exit137"]
)
def test_sigkill_is_oom_killed_only_when_the_kernel_says_so(
    exit_code: int | None, sig: int | None
) -> None:
    """A shell's "Killed" is only a SIGKILL: the kernel's OOM-killer record decides (issue 44)."""
    tail = [*NOISE, "bash: line 1:  4242 Killed                  vllm serve /models/x"]
    assert classify_exit(tail, exit_code=exit_code, signal=sig) is CrashClass.KILLED
    record = "Out of memory: Killed process 4242 (python3) total-vm:81234567kB, anon-rss:6123456kB"
    verdict = explain_exit(tail, exit_code=exit_code, signal=sig, kernel_oom=record)
    assert (verdict.crash_class, verdict.evidence) == (CrashClass.OOM_KILLED, record)


def test_killed_hint_without_a_sigkill_exit_is_not_oom() -> None:
    assert classify_exit([*NOISE, "Killed"], exit_code=1, signal=None) is CrashClass.UNKNOWN


def test_clean_exit_with_no_signature_is_unknown() -> None:
    verdict = explain_exit(NOISE, exit_code=0, signal=None)
    assert verdict.crash_class is CrashClass.UNKNOWN
    assert verdict.evidence is None


@pytest.mark.parametrize("kind", CRASH_KINDS)
def test_the_simulated_engines_traces_classify_as_their_kind(kind: str) -> None:
    assert classify_exit(crash_trace(kind), exit_code=1, signal=None) == CrashClass(kind)


def test_every_class_has_advice() -> None:
    for crash_class in CrashClass:
        assert advice_for(crash_class)


@pytest.mark.parametrize(
    ("returncode", "expected"),
    [(None, (None, None)), (0, (0, None)), (3, (3, None)), (-9, (None, 9)), (-2, (None, 2))],
)
def test_split_returncode(returncode: int | None, expected: tuple[int | None, int | None]) -> None:
    assert split_returncode(returncode) == expected
