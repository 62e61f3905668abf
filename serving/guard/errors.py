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
