"""A reply's repairs as it passes: salvage of leaked markup, loops caught as they start.

Streaming salvage: text before the first marker streams at once; from the marker on the
content is held (at most ``salvage_max_chars``: past that it is let go as text) until the
choice finishes, then either becomes ``tool_calls`` deltas with ``finish_reason:
"tool_calls"`` or is released as the text it was. A possible marker cut at the end of a
delta (``<``, ``<\uff5cDS``) is held back until the next delta says what it is.

Loops: the content's recent window is checked for a repeated line each time a line or
sentence ends (``serving.detectors.repeated_line``, the watch's own detector), so a loop is
caught while it streams, not after the engine spent its ``max_tokens``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from serving.detectors import repeated_line
from serving.guard.repair.salvage import Outcome, markup_start, maybe_marker_tail, salvage

LOOP_WINDOW_CHARS = 4000


class LoopWatch:
    """Finds a loop in a stream's content while it streams."""

    def __init__(self, repeats: int) -> None:
        self._repeats = repeats
        self._text = ""
        self.found: str | None = None  # the repeated line

    def feed(self, piece: str) -> bool:
        """Take a content delta; True once a loop is found."""
        if self.found is not None:
            return True
        self._text = (self._text + piece)[-LOOP_WINDOW_CHARS:]
        if "\n" in piece or ". " in piece or piece.endswith("."):
            hit = repeated_line(self._text, self._repeats)
            if hit is not None:
                self.found = hit[0]
        return self.found is not None

    @property
    def text(self) -> str:
        """The recent content (the nudge re-asks with it)."""
        return self._text


class StreamSalvage:
    """Holds a stream's content from the first marker; settles it at the finish."""

    def __init__(self, tools: Mapping[str, Mapping[str, Any]], max_chars: int) -> None:
        self._tools = tools
        self._max_chars = max_chars
        self._tail = ""  # a possible marker start, held back
        self._held = ""  # from the marker on
        self.holding = False
        self.gave_up: str | None = None  # why the hold was let go
        self.counted = False  # the give-up was counted

    @property
    def idle(self) -> bool:
        """True when nothing is held: a delta without ``<`` passes untouched."""
        return not self.holding and not self._tail

    def take(self, piece: str) -> str:
        """A content delta in; the text to send on now."""
        if self.gave_up is not None:
            return piece
        if self.holding:
            self._held += piece
            if len(self._held) > self._max_chars:
                self.gave_up = "the markup ran past salvage_max_chars"
                self.holding = False
                held, self._held = self._held, ""
                return held
            return ""
        text = self._tail + piece
        self._tail = ""
        if "<" not in text:
            return text
        at = markup_start(text)
        if at is not None:
            self.holding = True
            self._held = text[at:]
            return text[:at]
        tail = maybe_marker_tail(text)
        if tail is not None:
            self._tail = text[tail:]
            return text[:tail]
        return text

    def settle(self) -> tuple[Outcome | None, str]:
        """At the finish: the outcome (None: nothing held) and text still to send."""
        tail, self._tail = self._tail, ""
        if not self.holding:
            return None, tail
        held, self._held = self._held, ""
        self.holding = False
        outcome = salvage(held, self._tools, start=0)
        if outcome.calls:
            return outcome, ""
        return outcome, held + tail


def content_chunk(template: Mapping[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    """A chunk like ``template`` (its id, model, created) with one delta for choice 0."""
    chunk = {key: value for key, value in template.items() if key not in ("choices", "usage")}
    chunk["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]
    return copy.deepcopy(chunk)


def call_deltas(calls: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """``tool_calls`` deltas, each call whole (vLLM sends a salvaged call in one delta)."""
    return [{"index": index, **call} for index, call in enumerate(calls)]
