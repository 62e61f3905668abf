"""Limits on fleetd's HTTP listener: idle and half-sent requests end, connections are capped.

The mechanism (a bounded head, the head timer, the idle end that spares a waiting
request) is ``serving.http_limits``, shared with the traffic guard; here are fleetd's
figures: a head waits at most ``HEAD_TIMEOUT_S``, idle keep-alive connections end after
``KEEP_ALIVE_S``, at most ``MAX_CONNECTIONS`` are served at once (uvicorn answers 503
beyond) and a request head is at most ``MAX_HEAD_BYTES`` (issue 22). The unit's
``LimitNOFILE`` leaves room far above these.
"""

from __future__ import annotations

from typing import Any

from serving.http_limits import (
    HEAD_TIMEOUT_S,
    MAX_HEAD_BYTES,
    BoundedH11,
    bounded,
    request_waiting,
)

__all__ = [
    "HEAD_TIMEOUT_S",
    "KEEP_ALIVE_S",
    "MAX_CONNECTIONS",
    "MAX_HEAD_BYTES",
    "request_waiting",
    "uvicorn_limits",
]

KEEP_ALIVE_S = 5
MAX_CONNECTIONS = 256


def uvicorn_limits(head_timeout_s: float = HEAD_TIMEOUT_S) -> dict[str, Any]:
    """The ``uvicorn.Config`` keywords that bound the listener."""
    return {
        "http": bounded(BoundedH11, head_timeout_s),
        "timeout_keep_alive": KEEP_ALIVE_S,
        "limit_concurrency": MAX_CONNECTIONS,
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
    }
