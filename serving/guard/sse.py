"""Server-sent events as they come off the engine's socket: whole events, in order.

The engine writes one event per chunk, but TCP may split or join them; the guard reads
complete events (up to the blank line) so it can look inside, and passes each on as soon
as it is whole.
"""

from __future__ import annotations

import json
from typing import Any

DONE = b"[DONE]"
_SEPARATORS = (b"\r\n\r\n", b"\n\n")


class EventSplitter:
    """Feed bytes, get the complete events (each with its blank line) seen so far."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> list[bytes]:
        """The events ``data`` completes."""
        buffer = self._pending + data if self._pending else data
        if b"\r" not in buffer:  # the usual case (vLLM writes "\n\n"): one split, no search
            parts = buffer.split(b"\n\n")
            self._pending = parts.pop()
            return [part + b"\n\n" for part in parts]
        events: list[bytes] = []
        while True:
            ends = [(buffer.find(sep), sep) for sep in _SEPARATORS if sep in buffer]
            if not ends:
                break
            at, sep = min(ends)
            events.append(buffer[: at + len(sep)])
            buffer = buffer[at + len(sep) :]
        self._pending = buffer
        return events

    def rest(self) -> bytes:
        """What was left without its blank line (a stream cut short)."""
        rest, self._pending = self._pending, b""
        return rest


def event_data(event: bytes) -> bytes | None:
    """The ``data:`` payload of one event (lines joined), or None for a comment or ping."""
    if event.startswith(b"data: ") and event.find(b"\n") == len(event) - 2:
        return event[6:-2]  # one data line: the engine's every event
    lines = [
        line[5:].lstrip(b" ") if line.startswith(b"data:") else None for line in event.splitlines()
    ]
    data = [line for line in lines if line is not None]
    return b"\n".join(data) if data else None


def event_json(payload: bytes) -> dict[str, Any] | None:
    """The JSON object an event carries, or None (``[DONE]``, not JSON, not an object)."""
    if payload == DONE:
        return None
    try:
        value = json.loads(payload)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def data_event(body: dict[str, Any]) -> bytes:
    """One ``data:`` event carrying ``body``."""
    return b"data: " + json.dumps(body).encode() + b"\n\n"
