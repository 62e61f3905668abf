"""A stand-in for ``vllm serve``: the same HTTP surface, log lines and failure modes.

Run as ``python -m serving.simengine serve MODEL [vllm flags...] --port N --host H
--served-model-name NAME [--sim-... flags]``. It accepts (and ignores) every vLLM flag, so a
real preset's argv runs unchanged with the program swapped. It exists so that the
supervisor, the daemon, the dashboard and the canaries can be exercised for real (real
processes, real HTTP, real signals) on a machine with no GPU.

What it imitates: ``/health`` answers 503 while "loading" and 200 once ready;
``/v1/models`` lists the served name once ready; ``/v1/chat/completions`` answers in the
OpenAI shape, streamed (SSE) or not, at ``--sim-tokens-per-s``; ``/metrics`` exports vLLM's
metric names. SIGINT (vLLM's stop signal) and SIGTERM shut it down with exit 0.

Failure modes, each a flag: a CUDA crash with vLLM's trace after ready
(``--sim-crash-after-s``), a failure while loading (``--sim-fail-start-after-s``), a hang
(``--sim-hang-after-s``: connections are accepted but never answered), ignoring stop
signals, mangling copied identifiers and leaking tool calls as raw DSML markup.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

CRASH_KINDS = ("cuda_fault", "engine_dead", "kv_oom", "driver_poisoned", "rpc_timeout")
_TTFT_BUCKETS_S = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0)
_IDENTIFIER = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
_DSML = "\uff5cDSML\uff5c"  # the fullwidth bars DeepSeek's tool-call markup uses


@dataclass(frozen=True)
class SimOptions:
    """The flags the simulated engine understands (everything else is ignored)."""

    model: str
    served_model_name: str
    host: str
    port: int
    max_num_seqs: int
    max_model_len: int
    ready_after_s: float
    crash_after_s: float | None
    fail_start_after_s: float | None
    crash_kind: str
    hang_after_s: float | None
    ignore_sigint: bool
    ignore_signals: bool
    tokens_per_s: float
    corrupt_identifiers_pct: float
    leak_dsml: bool
    seed: int
    ignored: tuple[str, ...]


def _non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _percent(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"must be between 0 and 100, got {text}")
    return value


def parse_options(argv: Sequence[str]) -> SimOptions:
    """Parse ``serve MODEL ...``; unknown (vLLM) flags are kept in ``ignored``."""
    parser = argparse.ArgumentParser(
        prog="python -m serving.simengine", description=__doc__, allow_abbrev=False
    )
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", nargs="+", default=None)
    parser.add_argument("--max-num-seqs", type=int, default=8)
    parser.add_argument("--max-model-len", type=int, default=131072)
    parser.add_argument("--sim-ready-after-s", type=_non_negative, default=5.0)
    parser.add_argument("--sim-crash-after-s", type=_non_negative, default=None)
    parser.add_argument("--sim-fail-start-after-s", type=_non_negative, default=None)
    parser.add_argument("--sim-crash-kind", choices=CRASH_KINDS, default="cuda_fault")
    parser.add_argument("--sim-hang-after-s", type=_non_negative, default=None)
    parser.add_argument("--sim-ignore-sigint", action="store_true")
    parser.add_argument("--sim-ignore-signals", action="store_true")
    parser.add_argument("--sim-tokens-per-s", type=_positive, default=50.0)
    parser.add_argument("--sim-corrupt-identifiers-pct", type=_percent, default=0.0)
    parser.add_argument("--sim-leak-dsml", action="store_true")
    parser.add_argument("--sim-seed", type=int, default=0)
    args, unknown = parser.parse_known_args(list(argv))
    if not 0 < args.port < 65536:
        parser.error(f"--port must be between 1 and 65535, got {args.port}")
    if args.max_num_seqs < 1:
        parser.error(f"--max-num-seqs must be >= 1, got {args.max_num_seqs}")
    served = args.served_model_name[0] if args.served_model_name else args.model
    return SimOptions(
        model=args.model,
        served_model_name=served,
        host=args.host,
        port=args.port,
        max_num_seqs=args.max_num_seqs,
        max_model_len=args.max_model_len,
        ready_after_s=args.sim_ready_after_s,
        crash_after_s=args.sim_crash_after_s,
        fail_start_after_s=args.sim_fail_start_after_s,
        crash_kind=args.sim_crash_kind,
        hang_after_s=args.sim_hang_after_s,
        ignore_sigint=args.sim_ignore_sigint,
        ignore_signals=args.sim_ignore_signals,
        tokens_per_s=args.sim_tokens_per_s,
        corrupt_identifiers_pct=args.sim_corrupt_identifiers_pct,
        leak_dsml=args.sim_leak_dsml,
        seed=args.sim_seed,
        ignored=tuple(unknown),
    )


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


@dataclass(frozen=True)
class Reply:
    """What the model "says" for one request."""

    content: str | None
    tool_calls: list[dict[str, Any]] | None
    reasoning: str | None


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def code_identifiers(text: str) -> list[str]:
    """Identifiers that look like code (snake_case, camelCase, with digits), in order."""
    found: list[str] = []
    for word in _IDENTIFIER.findall(text):
        looks_like_code = (
            "_" in word.strip("_")
            or any(ch.isdigit() for ch in word)
            or any(ch.isupper() for ch in word[1:])
        )
        if looks_like_code and len(word) >= 3 and word not in found:
            found.append(word)
    return found


def mangle(identifier: str) -> str:
    """A plausible copying mistake: one character in the middle dropped."""
    middle = len(identifier) // 2
    return identifier[:middle] + identifier[middle + 1 :]


def _tool_arguments(tool: dict[str, Any], fallback: str) -> dict[str, Any]:
    parameters = tool.get("function", {}).get("parameters", {})
    properties = parameters.get("properties", {}) if isinstance(parameters, dict) else {}
    required = parameters.get("required", list(properties)) if isinstance(parameters, dict) else []
    return {name: fallback for name in required if isinstance(name, str)}


def compose_reply(request: dict[str, Any], options: SimOptions, rng: random.Random) -> Reply:
    """Build the answer: echo the prompt's identifiers, or call the first tool offered."""
    messages = request.get("messages") or []
    user_texts = [
        _message_text(m) for m in messages if isinstance(m, dict) and m.get("role") == "user"
    ]
    prompt = user_texts[-1] if user_texts else ""
    identifiers = code_identifiers(prompt)
    kwargs = request.get("chat_template_kwargs") or {}
    thinking = bool(kwargs.get("thinking")) if isinstance(kwargs, dict) else False
    reasoning = "The user asked a question; I answer it briefly." if thinking else None
    tools = request.get("tools") or []
    if tools and request.get("tool_choice") != "none" and isinstance(tools[0], dict):
        tool = tools[0]
        name = str(tool.get("function", {}).get("name", "tool"))
        arguments = _tool_arguments(tool, identifiers[0] if identifiers else "ls")
        if options.leak_dsml:
            params = "".join(
                f'<{_DSML}parameter name="{key}" string="true">{value}</{_DSML}parameter>\n'
                for key, value in arguments.items()
            )
            markup = (
                f'<{_DSML}tool_calls>\n<{_DSML}invoke name="{name}">\n{params}'
                f"</{_DSML}invoke>\n</{_DSML}tool_calls>"
            )
            return Reply(content=markup, tool_calls=None, reasoning=reasoning)
        call = {
            "id": f"chatcmpl-tool-{uuid.uuid4().hex[:16]}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        return Reply(content=None, tool_calls=[call], reasoning=reasoning)
    if identifiers:
        copied = [
            mangle(word) if rng.random() * 100 < options.corrupt_identifiers_pct else word
            for word in identifiers
        ]
        content = "Here are the identifiers you gave me: " + ", ".join(copied) + "."
    else:
        content = (
            "This is the cmpfleet simulated engine. It answers every question the same way, "
            "at a steady pace, so that probes and canaries have something real to read."
        )
    return Reply(content=content, tool_calls=None, reasoning=reasoning)


def split_tokens(text: str, limit: int) -> list[str]:
    """Words with their trailing spaces: the "tokens" streamed one by one."""
    return re.findall(r"\S+\s*", text)[: max(limit, 0)]


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

    def reply_for(self, request: dict[str, Any]) -> Reply:
        """Compose a reply (the random generator is shared, hence the lock)."""
        with self._rng_lock:
            return compose_reply(request, self.options, self._rng)

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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], engine: SimEngine) -> None:
        self.engine = engine
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: probes every few seconds would drown the engine log."""

    def _send_json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, message: str, kind: str) -> None:
        self._send_json(status, {"error": {"message": message, "type": kind, "code": status}})

    def do_GET(self) -> None:
        engine = self.server.engine
        engine.block_if_hung()
        path = self.path.split("?", 1)[0]
        if path == "/health":
            if engine.ready.is_set():
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self._send_error(503, "engine is loading", "ServiceUnavailable")
        elif path == "/v1/models":
            if not engine.ready.is_set():
                self._send_error(503, "engine is loading", "ServiceUnavailable")
                return
            options = engine.options
            model = {
                "id": options.served_model_name,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "vllm",
                "root": options.model,
                "parent": None,
                "max_model_len": options.max_model_len,
            }
            self._send_json(200, {"object": "list", "data": [model]})
        elif path == "/metrics":
            data = generate_latest(engine.registry)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._send_error(404, f"no route {path}", "NotFoundError")

    def do_POST(self) -> None:
        engine = self.server.engine
        engine.block_if_hung()
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        if path != "/v1/chat/completions":
            self._send_error(404, f"no route {path}", "NotFoundError")
            return
        if not engine.ready.is_set():
            self._send_error(503, "engine is loading", "ServiceUnavailable")
            return
        try:
            request = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._send_error(400, f"request body is not JSON: {exc}", "BadRequestError")
            return
        messages = request.get("messages") if isinstance(request, dict) else None
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            self._send_error(400, "request needs a `messages` list of objects", "BadRequestError")
            return
        model = request.get("model", engine.options.served_model_name)
        if model != engine.options.served_model_name:
            self._send_error(404, f"The model `{model}` does not exist.", "NotFoundError")
            return
        engine.log.line(f'INFO:     {self.client_address[0]} - "POST {path} HTTP/1.1" 200 OK')
        with engine.slot():
            if request.get("stream"):
                self._stream(engine, request)
            else:
                self._complete(engine, request)

    def _base(self, engine: SimEngine, completion_id: str, kind: str) -> dict[str, Any]:
        return {
            "id": completion_id,
            "object": kind,
            "created": int(time.time()),
            "model": engine.options.served_model_name,
        }

    def _complete(self, engine: SimEngine, request: dict[str, Any]) -> None:
        started = time.monotonic()
        reply = engine.reply_for(request)
        limit = int(request.get("max_tokens") or request.get("max_completion_tokens") or 256)
        tokens = split_tokens(reply.content or "", limit)
        content = "".join(tokens) if reply.content is not None else None
        generated = max(len(tokens), 1 if reply.tool_calls else 0)
        engine.pace(1)
        engine.ttft.observe(time.monotonic() - started)
        engine.pace(max(generated - 1, 0))
        engine.generation_tokens.inc(generated)
        prompt_tokens = sum(len(_message_text(m).split()) for m in request["messages"])
        engine.prompt_tokens.inc(prompt_tokens)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reply.reasoning is not None:
            message["reasoning"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = reply.tool_calls
        finish = "tool_calls" if reply.tool_calls else "length" if len(tokens) >= limit else "stop"
        body = self._base(engine, f"chatcmpl-{uuid.uuid4().hex}", "chat.completion")
        body["choices"] = [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        ]
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": generated,
            "total_tokens": prompt_tokens + generated,
        }
        self._send_json(200, body)

    def _stream(self, engine: SimEngine, request: dict[str, Any]) -> None:
        started = time.monotonic()
        reply = engine.reply_for(request)
        limit = int(request.get("max_tokens") or request.get("max_completion_tokens") or 256)
        tokens = split_tokens(reply.content or "", limit)
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        engine.prompt_tokens.inc(sum(len(_message_text(m).split()) for m in request["messages"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def send(delta: dict[str, Any], finish: str | None) -> None:
            chunk = self._base(engine, completion_id, "chat.completion.chunk")
            chunk["choices"] = [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            ]
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()

        send({"role": "assistant", "content": ""}, None)
        if reply.reasoning is not None:
            send({"reasoning": reply.reasoning}, None)
        first = True
        for token in tokens:
            engine.pace(1)
            if engine.stopping.is_set():
                return
            if first:
                engine.ttft.observe(time.monotonic() - started)
                first = False
            engine.generation_tokens.inc()
            send({"content": token}, None)
        if reply.tool_calls:
            engine.pace(1)
            engine.generation_tokens.inc()
            calls = [{"index": i, **call} for i, call in enumerate(reply.tool_calls)]
            send({"tool_calls": calls}, None)
        finish = "tool_calls" if reply.tool_calls else "length" if len(tokens) >= limit else "stop"
        send({}, finish)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def _install_signals(options: SimOptions, stopping: threading.Event) -> None:
    def on_stop(signum: int, frame: object) -> None:
        stopping.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        ignored = options.ignore_signals or (signum == signal.SIGINT and options.ignore_sigint)
        signal.signal(signum, signal.SIG_IGN if ignored else on_stop)


def _loading(engine: SimEngine, started: float) -> bool:
    """Print checkpoint-loading progress until ready; False when it must stop or fail."""
    options = engine.options
    step_s = max(0.2, min(2.0, options.ready_after_s / 10))
    fail_at = options.fail_start_after_s
    while True:
        elapsed = time.monotonic() - started
        if fail_at is not None and elapsed >= fail_at:
            for line in crash_trace(options.crash_kind):
                engine.log.line(line)
            return False
        if elapsed >= options.ready_after_s:
            return True
        pct = int(100 * elapsed / options.ready_after_s) if options.ready_after_s else 100
        shards = 46
        engine.log.line(
            f"Loading safetensors checkpoint shards: {pct:3d}% Completed | "
            f"{shards * pct // 100}/{shards} [{elapsed:05.1f}s]"
        )
        wait_s = min(step_s, options.ready_after_s - elapsed)
        if fail_at is not None:
            wait_s = min(wait_s, max(fail_at - elapsed, 0.0))
        if engine.stopping.wait(max(wait_s, 0.0)):
            return False


def run(options: SimOptions) -> int:
    """Serve until stopped (exit 0), crashed (exit 1) or unable to bind (exit 1)."""
    log = EngineLog()
    engine = SimEngine(options, log)
    _install_signals(options, engine.stopping)
    started = time.monotonic()
    log.vllm("INFO", "api_server.py:1880", "vLLM API server version 0.11.0 (cmpfleet simulated)")
    log.vllm("INFO", "utils.py:326", f"non-default args: {{'model': '{options.model}'}}")
    if options.ignored:
        log.vllm("INFO", "arg_utils.py:1320", f"accepted flags: {' '.join(options.ignored)}")
    log.vllm(
        "WARNING",
        "_custom_ops.py:20",
        "Failed to import from vllm._C with ModuleNotFoundError(\"No module named 'vllm._C'\")",
    )
    try:
        server = _Server((options.host, options.port), engine)
    except OSError as exc:
        log.vllm("ERROR", "api_server.py:1895", f"cannot bind {options.host}:{options.port}: {exc}")
        return 1
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
    )
    thread.start()
    log.vllm(
        "INFO",
        "api_server.py:1912",
        f"Starting vLLM API server 0 on http://{options.host}:{options.port}",
    )
    try:
        if not _loading(engine, started):
            if engine.stopping.is_set():
                log.line("INFO:     Shutting down")
                return 0
            return 1
        log.line(f"INFO:     Started server process [{os.getpid()}]")
        log.line("INFO:     Waiting for application startup.")
        engine.ready.set()
        log.line("INFO:     Application startup complete.")
        ready_at = time.monotonic()
        crash_at = None if options.crash_after_s is None else ready_at + options.crash_after_s
        hang_at = None if options.hang_after_s is None else ready_at + options.hang_after_s
        while True:
            deadlines = [t for t in (crash_at, hang_at) if t is not None]
            timeout = max(min(deadlines) - time.monotonic(), 0.0) if deadlines else None
            if engine.stopping.wait(timeout):
                log.line("INFO:     Shutting down")
                return 0
            now = time.monotonic()
            if crash_at is not None and now >= crash_at:
                for line in crash_trace(options.crash_kind):
                    log.line(line)
                return 1
            if hang_at is not None and now >= hang_at:
                engine.hung.set()
                hang_at = None
                log.vllm(
                    "WARNING",
                    "shm_broadcast.py:466",
                    "No available shared memory broadcast block found in 60 seconds. "
                    "This typically happens when some processes are hanging or doing some "
                    "time-consuming work (e.g. compilation, weight/kv cache quantization).",
                )
    finally:
        engine.stopping.set()
        server.shutdown()
        server.server_close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m serving.simengine``."""
    options = parse_options(sys.argv[1:] if argv is None else argv)
    return run(options)


if __name__ == "__main__":
    sys.exit(main())
