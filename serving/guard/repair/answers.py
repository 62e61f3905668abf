"""The repairs' error answers, in OpenAI's shape (``serving.guard.errors.GuardError``)."""

from __future__ import annotations

import math

from serving.guard.errors import GuardError
from serving.guard.repair.stale import stale_message


def queue_full(why: str, retry_after_s: float) -> GuardError:
    """A request that waited ``queue_timeout_s`` for a slot: 429 with ``Retry-After``."""
    seconds = max(1, math.ceil(retry_after_s))
    return GuardError(
        429,
        f"Too many requests in flight for this key or engine ({why}): retry in {seconds} s.",
        "rate_limit_error",
        "rate_limit_exceeded",
        retry_after_s=seconds,
    )


def stale_session(session: str) -> GuardError:
    """A session begun under another build, profile or pin set (``stale = "refuse"``)."""
    return GuardError(
        409,
        stale_message(session) + ".",
        "invalid_request_error",
        "stale_session",
        "messages",
    )
