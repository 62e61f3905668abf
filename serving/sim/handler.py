"""The simulated engine's HTTP surface: health, models, completions, tokenize, metrics.

``GET /sim/last-request`` (not vLLM's) answers the last completion request as received, so
a test of a proxy in front of the engine (the traffic guard) sees what really arrived.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.exposition import generate_latest

from serving.sim.core import SimEngine, temperature_of
from serving.sim.perf import PREFILL_SCALE_HEADER, PREFILL_WALL_HEADER, TIME_SCALE_HEADER
from serving.sim.replies import prompt_tokens_of, split_tokens

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
TOKENIZE = "/tokenize"


class EngineServer(ThreadingHTTPServer):
    """A threading HTTP server that hands each handler the one ``SimEngine``."""

    daemon_threads = True
    allow_reuse_address = True
    # vLLM's uvicorn listens with a backlog of 2048; socketserver's default of 5 drops the
    # SYNs of a burst of clients (each then waits a second to retry).
    request_queue_size = 2048

    def __init__(self, address: tuple[str, int], engine: SimEngine) -> None:
        self.engine = engine
        super().__init__(address, EngineHandler)


class EngineHandler(BaseHTTPRequestHandler):
    """The routes vLLM's OpenAI server answers, with its status codes and bodies."""

    protocol_version = "HTTP/1.1"
    server: EngineServer
    # Buffered: the status line, headers and body of a reply leave in one write when the
    # handler flushes (after each request, after each streamed event), as uvicorn sends them.
    wbufsize = 64 * 1024

    def setup(self) -> None:
        """``TCP_NODELAY`` on every connection, as uvicorn sets it under vLLM.

        Without both, a reply written in two pieces (header, then body) waits out Nagle
        against the keep-alive client's delayed ACK: about 40 ms a request.
        """
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: probes every few seconds would drown the engine log."""

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, message: str, kind: str) -> None:
        self._send_json(status, {"error": {"message": message, "type": kind, "code": status}})

    def do_GET(self) -> None:
        """Health, models, metrics (all wait forever while hung)."""
        engine = self.server.engine
        engine.block_if_hung()
        path = self.path.split("?", 1)[0]
        if path == "/health":
            if engine.dead.is_set():
                self.send_response(503)  # vLLM's Response(status_code=503): no body
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif engine.ready.is_set():
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
        elif path == "/sim/last-request":
            self._send_json(200, engine.last_request() or {})
        elif path == "/version":
            self._send_json(200, {"version": engine.version})
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
        """Chat and text completions (streamed or not) and ``/tokenize``."""
        engine = self.server.engine
        engine.block_if_hung()
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        if path not in (CHAT, COMPLETIONS, TOKENIZE):
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
        if not isinstance(request, dict):
            self._send_error(400, "request body must be a JSON object", "BadRequestError")
            return
        if path == TOKENIZE:
            count = prompt_tokens_of(request)
            body = {"count": count, "max_model_len": engine.options.max_model_len}
            self._send_json(200, {**body, "tokens": list(range(count))})
            return
        if path == COMPLETIONS:
            prompt = request.get("prompt")
            if not isinstance(prompt, str):
                self._send_error(400, "request needs a `prompt` string", "BadRequestError")
                return
            request = {**request, "messages": [{"role": "user", "content": prompt}]}
        messages = request.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            self._send_error(400, "request needs a `messages` list of objects", "BadRequestError")
            return
        model = request.get("model", engine.options.served_model_name)
        if model != engine.options.served_model_name:
            self._send_error(404, f"The model `{model}` does not exist.", "NotFoundError")
            return
        engine.remember(path, request)
        engine.log.line(f'INFO:     {self.client_address[0]} - "POST {path} HTTP/1.1" 200 OK')
        with engine.slot():
            if request.get("stream"):
                self._stream(engine, request, path == CHAT)
            else:
                self._complete(engine, request, path == CHAT)

    def _base(self, engine: SimEngine, completion_id: str, kind: str) -> dict[str, Any]:
        return {
            "id": completion_id,
            "object": kind,
            "created": int(time.time()),
            "model": engine.options.served_model_name,
        }

    def _complete(self, engine: SimEngine, request: dict[str, Any], chat: bool) -> None:
        started = time.monotonic()
        reply = engine.reply_for(request)
        limit = int(request.get("max_tokens") or request.get("max_completion_tokens") or 256)
        tokens = split_tokens(reply.content or "", limit, bool(request.get("ignore_eos")))
        content = "".join(tokens) if reply.content is not None else None
        generated = max(len(tokens), 1 if reply.tool_calls else 0)
        prompt_tokens = prompt_tokens_of(request)
        temperature = temperature_of(request)
        clock = engine.prefill_clock(prompt_tokens)
        engine.prefill(prompt_tokens)
        engine.pace(1, prompt_tokens, temperature)
        engine.ttft.observe(time.monotonic() - started)
        engine.pace(max(generated - 1, 0), prompt_tokens, temperature)
        engine.generation_tokens.inc(generated)
        engine.prompt_tokens.inc(prompt_tokens)
        engine.observe_finished(request, prompt_tokens, generated)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reply.reasoning is not None:
            message["reasoning"] = reply.reasoning
        if reply.reasoning_content is not None:
            message["reasoning_content"] = reply.reasoning_content
        if reply.tool_calls:
            message["tool_calls"] = reply.tool_calls
        finish = "tool_calls" if reply.tool_calls else "length" if len(tokens) >= limit else "stop"
        if chat:
            body = self._base(engine, f"chatcmpl-{uuid.uuid4().hex}", "chat.completion")
            choice: dict[str, Any] = {"index": 0, "message": message}
        else:
            body = self._base(engine, f"cmpl-{uuid.uuid4().hex}", "text_completion")
            choice = {"index": 0, "text": content or ""}
        body["choices"] = [{**choice, "logprobs": None, "finish_reason": finish}]
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": generated,
            "total_tokens": prompt_tokens + generated,
        }
        self._send_json(200, body, _scale_headers(engine, clock))

    def _stream(self, engine: SimEngine, request: dict[str, Any], chat: bool) -> None:
        started = time.monotonic()
        reply = engine.reply_for(request)
        limit = int(request.get("max_tokens") or request.get("max_completion_tokens") or 256)
        tokens = split_tokens(reply.content or "", limit, bool(request.get("ignore_eos")))
        completion_id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        kind = "chat.completion.chunk" if chat else "text_completion"
        prompt_tokens = prompt_tokens_of(request)
        temperature = temperature_of(request)
        engine.prompt_tokens.inc(prompt_tokens)
        self.send_response(200)
        for name, value in _scale_headers(engine, engine.prefill_clock(prompt_tokens)).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def send(delta: dict[str, Any], finish: str | None) -> None:
            chunk = self._base(engine, completion_id, kind)
            part = {"delta": delta} if chat else {"text": delta.get("content", "")}
            chunk["choices"] = [{"index": 0, **part, "logprobs": None, "finish_reason": finish}]
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()

        if chat:
            send({"role": "assistant", "content": ""}, None)
        engine.prefill(prompt_tokens)
        thought = reply.reasoning if reply.reasoning is not None else reply.reasoning_content
        fields = [
            key
            for key, value in (
                ("reasoning", reply.reasoning),
                ("reasoning_content", reply.reasoning_content),
            )
            if value is not None
        ]
        deadline = None
        for piece in split_tokens(thought or "", limit) if chat else []:
            deadline = engine.pace(1, prompt_tokens, temperature, deadline)
            if engine.stopping.is_set():
                return
            send(dict.fromkeys(fields, piece), None)
        first = True
        for token in tokens:
            deadline = engine.pace(1, prompt_tokens, temperature, deadline)
            if engine.stopping.is_set():
                return
            if first:
                engine.ttft.observe(time.monotonic() - started)
                first = False
            engine.generation_tokens.inc()
            send({"content": token}, None)
        if reply.tool_calls:
            engine.pace(1, prompt_tokens, temperature, deadline)
            engine.generation_tokens.inc()
            calls = [{"index": i, **call} for i, call in enumerate(reply.tool_calls)]
            send({"tool_calls": calls}, None)
        finish = "tool_calls" if reply.tool_calls else "length" if len(tokens) >= limit else "stop"
        send({}, finish)
        generated = len(tokens) + (1 if reply.tool_calls else 0)
        engine.observe_finished(request, prompt_tokens, generated)
        options = request.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            chunk = self._base(engine, completion_id, kind)
            chunk["choices"] = []
            chunk["usage"] = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": generated,
                "total_tokens": prompt_tokens + generated,
            }
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def _scale_headers(engine: SimEngine, prefill: tuple[float, float]) -> dict[str, str]:
    """The simulation's clock (``serving.sim.perf``): wall seconds per rig second."""
    return {
        TIME_SCALE_HEADER: f"{engine.perf.time_scale:.6g}",
        PREFILL_SCALE_HEADER: f"{prefill[0]:.6g}",
        PREFILL_WALL_HEADER: f"{prefill[1]:.6g}",
    }
