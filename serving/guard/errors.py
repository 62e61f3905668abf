"""The guard's own answers, in OpenAI's error shape so every client shows them.

``{"error": {"message", "type", "param", "code"}}`` is what OpenAI's API and vLLM answer;
the OpenAI clients raise it as the matching exception (a 401 as an authentication error,
a 503 as retryable). A 503 carries ``Retry-After`` so clients wait and try again instead
of failing the agent's turn. In a stream that has already begun, the same error goes as
one ``data:`` event, which the clients raise as an API error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GuardError:
    """One error answer: status, OpenAI ``type`` and ``code``, the line a person reads."""

    status: int
    message: str
    type: str
    code: str
    param: str | None = None
    retry_after_s: int | None = None

    def body(self) -> bytes:
        """The JSON body."""
        error = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        return json.dumps({"error": error}).encode()

    def event(self) -> bytes:
        """The same error as one server-sent event (a stream that has already begun)."""
        return b"data: " + self.body() + b"\n\n"

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The response headers (``Retry-After`` on a retryable answer)."""
        headers = [(b"content-type", b"application/json")]
        if self.retry_after_s is not None:
            headers.append((b"retry-after", str(self.retry_after_s).encode()))
        return headers


def missing_key() -> GuardError:
    """No ``Authorization: Bearer`` key on a guard that has keys."""
    return GuardError(
        401,
        "You didn't provide an API key: send this rig's guard key as "
        "'Authorization: Bearer KEY' (the client's api_key).",
        "invalid_request_error",
        "invalid_api_key",
    )


def wrong_key() -> GuardError:
    """A key that is none of the configured ones (never echoed back)."""
    return GuardError(
        401,
        "Incorrect API key provided: it is none of this rig's guard keys "
        "(fleetctl guard key NAME makes one).",
        "invalid_request_error",
        "invalid_api_key",
    )


def over_cap(prompt_tokens: int, cap: int) -> GuardError:
    """A prompt over ``[guard] max_context_tokens``."""
    return GuardError(
        400,
        f"This conversation is {prompt_tokens} tokens, over this rig's context cap of {cap} "
        "tokens (max_context_tokens): the model loops and leaks past it. Compact the "
        "conversation or start a new session.",
        "invalid_request_error",
        "context_length_exceeded",
        "messages",
    )


def engine_unavailable(why: str, retry_after_s: int) -> GuardError:
    """The engine is down, starting or restarting: retry later."""
    return GuardError(
        503,
        f"The engine is not serving ({why}): retry in {retry_after_s} s.",
        "server_error",
        "engine_unavailable",
        retry_after_s=retry_after_s,
    )


def draining(why: str, retry_after_s: int) -> GuardError:
    """fleetd drains this rig (a reboot, a person's ``fleetctl drain``): go elsewhere.

    The same answer on ``/health``, so a load balancer's health check takes the rig out,
    and on every request, which a balancer retries on another rig (nothing reached the
    engine, so a retry is safe even for a POST).
    """
    return GuardError(
        503,
        f"This rig is draining ({why}): send new requests to another rig, or retry in "
        f"{retry_after_s} s.",
        "server_error",
        "draining",
        retry_after_s=retry_after_s,
    )


def unknown_model(model: str, served: list[str]) -> GuardError:
    """A ``model`` none of this rig's engines serves (OpenAI's answer for a model it lacks)."""
    return GuardError(
        404,
        f"The model `{model[:200]}` does not exist on this rig: it serves "
        f"{', '.join(served) or 'nothing now'}.",
        "invalid_request_error",
        "model_not_found",
        "model",
    )


def bad_gateway(why: str, retry_after_s: int) -> GuardError:
    """The engine broke the connection or answered what is not HTTP."""
    return GuardError(
        502,
        f"The engine's answer broke off ({why}): retry in {retry_after_s} s.",
        "server_error",
        "engine_connection_lost",
        retry_after_s=retry_after_s,
    )


def too_large(limit_mib: float) -> GuardError:
    """A request body over ``[guard] max_body_mib``."""
    return GuardError(
        413,
        f"The request body is over this guard's limit of {limit_mib:g} MiB (max_body_mib).",
        "invalid_request_error",
        "request_too_large",
    )


def stream_lost(why: str) -> GuardError:
    """The engine went away in the middle of a streamed reply."""
    return GuardError(
        502,
        f"The engine stopped in the middle of this reply ({why}); the reply is incomplete: "
        "retry the request.",
        "server_error",
        "engine_connection_lost",
    )


def head_too_large(limit_kib: int) -> GuardError:
    """A request head (line and headers) over the listener's limit: refused before any key."""
    return GuardError(
        431,
        f"The request's headers are over this guard's limit of {limit_kib} KiB.",
        "invalid_request_error",
        "request_header_fields_too_large",
    )


def bad_json(why: str) -> GuardError:
    """A request body the guard will not re-send (non-finite numbers, nesting too deep)."""
    return GuardError(
        400,
        f"We could not parse the JSON body of your request: {why}.",
        "invalid_request_error",
        "invalid_json",
    )


def unknown_route(method: str, path: str) -> GuardError:
    """A path the guard does not forward (``[guard] routes``): OpenAI's own 404."""
    return GuardError(
        404,
        f"Unknown request URL: {method} {path}. This guard forwards only the OpenAI API's "
        "routes ([guard] routes).",
        "invalid_request_error",
        "unknown_url",
    )


def too_many_connections(retry_after_s: int) -> GuardError:
    """Past ``[guard] max_connections``: retry shortly."""
    return GuardError(
        503,
        f"This guard has too many open connections (max_connections): retry in {retry_after_s} s.",
        "server_error",
        "too_many_connections",
        retry_after_s=retry_after_s,
    )
