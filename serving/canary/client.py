"""The engine's OpenAI-compatible API as the canaries need it, behind a small protocol.

``EngineApi`` is the boundary: the suite talks to it and tests may hand in another one.
``HttpEngineApi`` is the real one (httpx, loopback). Errors come out as ``CanaryCallError``
with one line, and a timeout as ``CanaryTimeout``, so a canary never raises past the suite.
"""

from __future__ import annotations

import json
import time
from typing import Any, Protocol

import httpx

from serving.canary.throughput import StreamTiming
from serving.runtime.metrics import MetricsError, parse_metrics


class CanaryCallError(Exception):
    """The engine answered with an error or not at all (one line)."""


class CanaryTimeout(CanaryCallError):
    """The engine did not answer within the canary's timeout."""


class CanaryUnreachable(CanaryCallError):
    """The engine cannot be reached (stopped, restarting): nothing was judged."""


class EngineApi(Protocol):
    """What a canary round asks of the engine."""

    def chat(self, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """One non-streamed chat completion: the whole response document."""
        ...

    def stream_timing(self, body: dict[str, Any], timeout_s: float) -> StreamTiming:
        """One streamed chat completion, timed token by token."""
        ...

    def running_requests(self, timeout_s: float) -> int | None:
        """Requests the engine is running now (``None`` when it does not say)."""
        ...

    def close(self) -> None:
        """Release connections (the end of a round)."""
        ...


def first_message(document: dict[str, Any]) -> dict[str, Any]:
    """``choices[0].message`` of a response, or a ``CanaryCallError`` naming what is missing."""
    try:
        message = document["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise CanaryCallError("the reply has no choices[0].message") from None
    if not isinstance(message, dict):
        raise CanaryCallError("choices[0].message is not an object")
    return message


class HttpEngineApi:
    """``EngineApi`` over HTTP to ``base_url`` (``http://127.0.0.1:PORT``), serving ``model``."""

    def __init__(self, base_url: str, model: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        # One client per round: building one per request costs an SSL context each time.
        self._http = httpx.Client()

    def close(self) -> None:
        """Close the round's connections."""
        self._http.close()

    def _body(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"model": self.model, **body}

    def chat(self, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """POST ``/v1/chat/completions`` and return the JSON document."""
        url = f"{self.base_url}/v1/chat/completions"
        try:
            response = self._http.post(url, json=self._body(body), timeout=timeout_s)
        except httpx.TimeoutException:
            raise CanaryTimeout(f"no answer within {timeout_s:g} s") from None
        except httpx.HTTPError as exc:
            raise CanaryUnreachable(f"cannot reach the engine: {exc.__class__.__name__}") from None
        if response.status_code >= 400:
            raise CanaryCallError(
                f"the engine answered HTTP {response.status_code}: {_reason(response)}"
            )
        try:
            document = response.json()
        except ValueError:
            raise CanaryCallError("the engine's answer is not JSON") from None
        if not isinstance(document, dict):
            raise CanaryCallError("the engine's answer is not a JSON object")
        return document

    def stream_timing(self, body: dict[str, Any], timeout_s: float) -> StreamTiming:
        """Stream one completion; time the first and last content token; read usage."""
        url = f"{self.base_url}/v1/chat/completions"
        deadline = time.monotonic() + timeout_s
        sent = time.monotonic()
        first: float | None = None
        last: float | None = None
        chunks = 0
        usage: dict[str, Any] = {}
        try:
            with self._http.stream(
                "POST", url, json=self._body(body), timeout=timeout_s
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    raise CanaryCallError(
                        f"the engine answered HTTP {response.status_code}: {_reason(response)}"
                    )
                for line in response.iter_lines():
                    if time.monotonic() > deadline:
                        raise CanaryTimeout(f"the stream took longer than {timeout_s:g} s")
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    chunk = json.loads(line[len("data: ") :])
                    if isinstance(chunk.get("usage"), dict):
                        usage = chunk["usage"]
                    for choice in chunk.get("choices") or []:
                        delta = choice.get("delta") or {}
                        if (
                            delta.get("content")
                            or delta.get("reasoning_content")
                            or delta.get("reasoning")
                        ):
                            now = time.monotonic()
                            first = now if first is None else first
                            last = now
                            chunks += 1
        except httpx.TimeoutException:
            raise CanaryTimeout(f"no answer within {timeout_s:g} s") from None
        except httpx.HTTPError as exc:
            raise CanaryUnreachable(f"cannot reach the engine: {exc.__class__.__name__}") from None
        except json.JSONDecodeError:
            raise CanaryCallError("a streamed chunk is not JSON") from None
        if first is None or last is None:
            raise CanaryCallError("the stream carried no tokens")
        completion = int(usage.get("completion_tokens") or chunks)
        prompt = int(usage.get("prompt_tokens") or 0)
        return StreamTiming(prompt, completion, first - sent, last - first)

    def running_requests(self, timeout_s: float) -> int | None:
        """``vllm:num_requests_running`` from the engine's ``/metrics``."""
        try:
            response = self._http.get(f"{self.base_url}/metrics", timeout=timeout_s)
            response.raise_for_status()
            running = parse_metrics(response.text).requests_running
        except (httpx.HTTPError, MetricsError):
            return None
        return None if running is None else round(running)


def _reason(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
        message = error.get("message") if isinstance(error, dict) else None
    except (ValueError, AttributeError):
        message = None
    return str(message or response.text[:120] or response.reason_phrase).splitlines()[0]
