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
from serving.sim.perf import PerfModel
from serving.sim.replies import Reply, compose_reply, message_text
from serving.sim.vllm_metrics import VllmExtras

# How late a pacing thread may wake and still keep its schedule (see ``SimEngine.pace``).
# 0.1 s was short of what a loaded host does: the test suite's ten workers on 2 cores (load
# 14) once kept a stream's thread from its tokens for about 0.2 s, and a healthy rig's quick
# bench (its single stream: 32 tokens, about a second) measured 83% of the reference.
SCHEDULING_JITTER_S = 0.3
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
        # vLLM V1's wording (v1/core/kv_cache_utils.py), then the API server's own long
        # traceback for the start failure it causes: the classifier must read past it.
        api_frames = [
            f'  File "/opt/vllm/vllm/entrypoints/openai/api_server.py", line {100 + n}, in run'
            for n in range(60)
        ]
        return [
            *head,
            "ValueError: To serve at least one request with the models's max seq len (1048576), "
            "(38.00 GiB KV cache is needed, which is larger than the available KV cache memory "
            "(9.79 GiB). Based on the available memory, the estimated maximum model length is "
            "269824. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
            "initializing the engine.",
            "ERROR [core.py:708] EngineCore failed to start.",
            "Traceback (most recent call last):",
            *api_frames,
            "RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {}",
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
        # The engine core died (a crash): vLLM's /health answers 503 (EngineDeadError) on any
        # connection still open until the process is gone.
        self.dead = threading.Event()
        self._slots = threading.BoundedSemaphore(options.max_num_seqs)
        self._rng = random.Random(options.seed)  # noqa: S311 (simulated mistakes, not secrets)
        self._rng_lock = threading.Lock()
        # The last completion request as received (``GET /sim/last-request``): tests see
        # what a proxy in front of the engine (the traffic guard) really sent.
        self._last_request: dict[str, Any] | None = None
        self._last_lock = threading.Lock()
        self._serial = 0
        self._ready_at_s: float | None = None
        # The request that crossed ``--sim-crash-at-depth-tokens``: (its tokens, its id).
        self.deep_crash: tuple[int, str] | None = None
        build = build_of(options.build_file, options.image)
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
        self.perf = PerfModel(
            options.perf,
            options.tokens_per_s,
            options.prefill_tokens_per_s,
            options.max_num_seqs,
            options.spec.num_speculative_tokens,
            options.spec.acceptance,
        )

    def became_ready(self) -> None:
        """Ready from now on (the speculative-decoding collapse counts from here)."""
        self._ready_at_s = time.monotonic()
        self.perf.publish()  # the cards' load file exists from ready on
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
        temperature = temperature_of(request)
        base = self.options.spec.acceptance_at(self.since_ready_s())
        itl_s = self.perf.token_wait_s(prompt_tokens, temperature, base)
        accepted = self.perf.acceptance(prompt_tokens, temperature, base)
        self.extras.observe(prompt, prompt_tokens, generated, itl_s, self.since_ready_s(), accepted)

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
        self.perf.started()
        self.kv_usage.set(self._usage())
        try:
            yield
        finally:
            self.perf.finished()
            self.running.dec()
            self._slots.release()
            self.kv_usage.set(self._usage())

    def _usage(self) -> float:
        running = self.registry.get_sample_value(
            "vllm:num_requests_running", {"model_name": self.options.served_model_name}
        )
        return (running or 0.0) / self.options.max_num_seqs

    def pace(
        self,
        tokens: int,
        depth_tokens: int = 0,
        temperature: float = 1.0,
        since: float | None = None,
    ) -> float:
        """Wait as long as generating ``tokens`` takes now (returns early when stopping).

        The rate follows the batch, the depth, the temperature's drafts accepted and the
        power cap (``serving.sim.perf``). ``since``: the previous token's deadline (the
        answer of the last call), so the time spent writing a token is not added to the
        next one's wait: the rate holds on a loaded host.
        """
        base = self.options.spec.acceptance_at(self.since_ready_s())
        wait_s = tokens * self.perf.token_wait_s(depth_tokens, temperature, base)
        now = time.monotonic()
        # Behind by less than a token or the host's scheduling jitter: the write's own time
        # and a late wake-up are absorbed (the cards' rate does not follow the host's CPU
        # load: on a 2-core host at load 10 a thread woke tens of ms late at every token and
        # the simulated decode measured 75% of its rate). Further behind (a stall): a fresh
        # schedule, never a burst of catch-up tokens.
        start = now if since is None or now - since > max(wait_s, SCHEDULING_JITTER_S) else since
        deadline = start + wait_s
        self.stopping.wait(max(deadline - now, 0.0))
        return deadline

    def prefill(self, prompt_tokens: int) -> None:
        """Wait as long as reading a prompt of ``prompt_tokens`` takes (before the first token).

        One prompt at a time. Deep prompts past ``--sim-prefill-pace-max-tokens`` (0: no
        limit) are read faster still (``serving.sim.perf``), so deep canaries stay cheap.
        """
        paced = self.options.defects.paced_prefill_tokens(prompt_tokens)
        with self.perf.prefill_lock:
            self.stopping.wait(self.perf.prefill_wait_s(prompt_tokens, paced))
        self.crash_if_too_deep(prompt_tokens)

    def crash_if_too_deep(self, prompt_tokens: int) -> None:
        """``--sim-crash-at-depth-tokens``: the first request that deep kills the engine.

        The request never gets an answer (its worker died): it waits for the process end.
        """
        depth = self.options.depth_crash.depth_tokens
        if depth is None or prompt_tokens < depth:
            return
        with self._last_lock:
            if self.deep_crash is None:
                self._serial += 1
                self.deep_crash = (prompt_tokens, f"chatcmpl-sim-{self._serial}")
        self.stopping.set()
        threading.Event().wait(60.0)

    def prefill_clock(self, prompt_tokens: int) -> tuple[float, float]:
        """This prompt's prefill (wall seconds per rig second, wall seconds) for the headers."""
        paced = self.options.defects.paced_prefill_tokens(prompt_tokens)
        return (
            self.perf.prefill_scale(prompt_tokens, paced),
            self.perf.prefill_wait_s(prompt_tokens, paced),
        )


def temperature_of(request: dict[str, Any]) -> float:
    """A request's sampling temperature (vLLM's default 1 when it sends none)."""
    value = request.get("temperature")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 1.0
    return float(value)
