"""The simulated engine's shared state and vLLM-shaped log lines, crash traces included."""

from __future__ import annotations

import contextlib
import dataclasses
import random
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from serving.sim.defects import context_tokens, drifted, loop_text, recall_reply
from serving.sim.images import SIM_ENGINE_VERSION, build_of
from serving.sim.options import SimOptions
from serving.sim.replies import Reply, compose_reply, message_text
from serving.sim.vllm_metrics import VllmExtras

_TTFT_BUCKETS_S = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0)


class EngineLog:
    """vLLM-shaped log lines on stdout, one write and flush per line (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        """Write one raw line."""
        with self._lock:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()

    def vllm(self, level: str, where: str, message: str) -> None:
        """A line in vLLM's format: ``INFO 12-02 10:11:12 [file.py:123] message``."""
        stamp = datetime.now().astimezone().strftime("%m-%d %H:%M:%S")
        self.line(f"{level} {stamp} [{where}] {message}")


def crash_trace(kind: str) -> list[str]:
    """The last lines vLLM prints for one kind of crash (as seen in rig logs)."""
    head = [
        "ERROR [core.py:710] EngineCore encountered a fatal error.",
        "Traceback (most recent call last):",
        '  File "/opt/vllm/vllm/v1/engine/core.py", line 701, in run_engine_core',
        "    engine_core.run_busy_loop()",
        '  File "/opt/vllm/vllm/v1/engine/core.py", line 728, in run_busy_loop',
        "    self._process_engine_step()",
    ]
    if kind == "cuda_fault":
        return [
            *head,
            '  File "/opt/vllm/vllm/v1/worker/gpu_model_runner.py", line 1894, in sample_tokens',
            "    sampled_token_ids = sampler_output.sampled_token_ids.tolist()",
            "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
            "Search for `cudaErrorIllegalAddress' in "
            "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html "
            "for more information.",
            "CUDA kernel errors might be asynchronously reported at some other API call, "
            "so the stacktrace below might be incorrect.",
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
            "(Worker_PP1 pid=4242) ERROR [multiproc_executor.py:671] RuntimeError: "
            "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] "
            "Connection closed by peer [127.0.0.1]:51234",
            "ERROR [async_llm.py:480] AsyncLLM output_handler failed.",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
            "See stack trace (above) for the root cause.",
            "RuntimeError: CUDA error: an illegal memory access was encountered",
        ]
    if kind == "engine_dead":
        return [
            *head,
            "ValueError: Failed to advance FSM for request chatcmpl-1 for tokens 128799",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
            "See stack trace (above) for the root cause.",
        ]
    if kind == "kv_oom":
        return [
            *head,
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine.",
            "RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {}",
            "RuntimeError: EngineCore failed to start.",
        ]
    if kind == "driver_poisoned":
        return [
            *head,
            "RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.",
            "RuntimeError: EngineCore failed to start.",
        ]
    return [
        *head,
        "TimeoutError: RPC call to sample_tokens timed out.",
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
        "See stack trace (above) for the root cause.",
    ]


class SimEngine:
    """Shared state of one simulated engine: readiness, hang, metrics, pacing."""

    def __init__(self, options: SimOptions, log: EngineLog) -> None:
        self.options = options
        self.log = log
        self.ready = threading.Event()
        self.hung = threading.Event()
        self.stopping = threading.Event()
        self._slots = threading.BoundedSemaphore(options.max_num_seqs)
        self._rng = random.Random(options.seed)  # noqa: S311 (simulated mistakes, not secrets)
        self._rng_lock = threading.Lock()
        # The last completion request as received (``GET /sim/last-request``): tests see
        # what a proxy in front of the engine (the traffic guard) really sent.
        self._last_request: dict[str, Any] | None = None
        self._last_lock = threading.Lock()
        self._serial = 0
        self._ready_at_s: float | None = None
        build = build_of(options.build_file)
        self.version = str((build or {}).get("version") or SIM_ENGINE_VERSION)
        self.registry = CollectorRegistry()
        label = {"model_name": options.served_model_name}
        self.generation_tokens = Counter(
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            ["model_name"],
            registry=self.registry,
        ).labels(**label)
        self.prompt_tokens = Counter(
            "vllm:prompt_tokens",
            "Number of prefill tokens processed.",
            ["model_name"],
            registry=self.registry,
        ).labels(**label)
        self.running = Gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            ["model_name"],
            registry=self.registry,
        ).labels(**label)
        self.waiting = Gauge(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            ["model_name"],
            registry=self.registry,
        ).labels(**label)
        self.kv_usage = Gauge(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            ["model_name"],
            registry=self.registry,
        ).labels(**label)
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            ["model_name"],
            buckets=_TTFT_BUCKETS_S,
            registry=self.registry,
        ).labels(**label)
        self.extras = VllmExtras(self.registry, options.served_model_name, options.spec)

    def became_ready(self) -> None:
        """Ready from now on (the speculative-decoding collapse counts from here)."""
        self._ready_at_s = time.monotonic()
        self.ready.set()

    def since_ready_s(self) -> float:
        """Seconds since ready (0 before)."""
        return 0.0 if self._ready_at_s is None else time.monotonic() - self._ready_at_s

    def remember(self, path: str, request: dict[str, Any]) -> None:
        """Keep the request (with the path it came on) as the last one received."""
        with self._last_lock:
            self._last_request = {"path": path, "body": request}

    def last_request(self) -> dict[str, Any] | None:
        """The last completion request received, or None."""
        with self._last_lock:
            return self._last_request

    def reply_for(self, request: dict[str, Any]) -> Reply:
        """Compose a reply (the random generator is shared, hence the lock).

        The long-context defects (``serving.sim.defects``) come first: a recall question
        is answered with what this context length keeps, a tool request past the loop
        threshold gets announcements instead of the call, copies inside the corruption
        band are mangled; a drifting build then changes a word of its prose.
        """
        messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
        defects = self.options.defects
        depth = context_tokens(messages, message_text)
        with self._rng_lock:
            self._serial += 1
            serial = self._serial
            users = [message_text(m) for m in messages if m.get("role") == "user"]
            recalled = (
                recall_reply(users[-1], defects.recall_ratio(depth), self._rng) if users else None
            )
            if recalled is not None:
                return Reply(content=recalled, tool_calls=None, reasoning=None)
            if request.get("tools") and defects.loops(depth):
                return Reply(content=loop_text(), tool_calls=None, reasoning=None)
            pct = defects.copy_pct(depth, self.options.corrupt_identifiers_pct)
            options = dataclasses.replace(self.options, corrupt_identifiers_pct=pct)
            reply = compose_reply(request, options, self._rng)
        if (
            defects.drift
            and request.get("temperature") == 0
            and reply.content
            and not reply.tool_calls
        ):
            return dataclasses.replace(reply, content=drifted(reply.content, serial))
        return reply

    def observe_finished(self, request: dict[str, Any], prompt_tokens: int, generated: int) -> None:
        """The extra vLLM metrics of one finished request (cache, decode steps, drafts)."""
        prompt = "\n".join(
            message_text(m) for m in request.get("messages") or [] if isinstance(m, dict)
        )
        itl_s = 1.0 / self.options.tokens_per_s
        self.extras.observe(prompt, prompt_tokens, generated, itl_s, self.since_ready_s())

    def block_if_hung(self) -> None:
        """A hung engine accepts the connection and never answers (until it stops)."""
        if self.hung.is_set():
            self.stopping.wait()

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """One of ``max_num_seqs`` running slots; the wait shows as ``num_requests_waiting``."""
        self.waiting.inc()
        self._slots.acquire()
        self.waiting.dec()
        self.running.inc()
        self.kv_usage.set(self._usage())
        try:
            yield
        finally:
            self.running.dec()
            self._slots.release()
            self.kv_usage.set(self._usage())

    def _usage(self) -> float:
        running = self.registry.get_sample_value(
            "vllm:num_requests_running", {"model_name": self.options.served_model_name}
        )
        return (running or 0.0) / self.options.max_num_seqs

    def pace(self, tokens: int) -> None:
        """Wait as long as generating ``tokens`` takes (returns early when stopping)."""
        self.stopping.wait(tokens / self.options.tokens_per_s)

    def prefill(self, prompt_tokens: int) -> None:
        """Wait as long as reading a prompt of ``prompt_tokens`` takes (before the first token).

        Deep prompts are paced for at most ``--sim-prefill-pace-max-tokens`` (0: all).
        """
        paced = self.options.defects.paced_prefill_tokens(prompt_tokens)
        self.stopping.wait(paced / self.options.prefill_tokens_per_s)
