"""The byte pre-scan: most streamed chunks carry one plain content delta and nothing else.

Such a chunk needs no JSON parse and no re-encode: its content string is cut out of the
bytes (decoded only when it has escapes) for the watch, and the event goes on as it came.
Anything else (reasoning, tool calls, usage, a finish, several choices, a marker or think
tag in the text) takes the full path.
"""

from __future__ import annotations

import json
import re

_CONTENT = re.compile(rb'"delta": ?\{"content": ?"((?:[^"\\]|\\.)*)"\}')
_BUSY = (b'"tool_calls"', b'"reasoning', b'"usage": {', b'"usage":{', b"<", b"\\u003c")
_OPEN = (b'"finish_reason": null', b'"finish_reason":null')


def plain_content(event: bytes) -> str | None:
    """The content of a chunk that carries only a plain content delta; else None."""
    if event.count(b'"index"') != 1 or any(mark in event for mark in _BUSY):
        return None
    if not any(mark in event for mark in _OPEN):
        return None
    match = _CONTENT.search(event)
    if match is None:
        return None
    raw = match.group(1)
    if b"\\" not in raw:
        return raw.decode("utf-8", "replace")
    text = json.loads(b'"' + raw + b'"')
    return text if isinstance(text, str) and "<" not in text else None
