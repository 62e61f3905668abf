"""One streamed reply's events through the repairs: pre-scanned, watched, salvaged, cut.

The guard's relay (``serving.guard.app``) hands each server-sent event here and sends on
what comes back. A chunk with one plain content delta and nothing to repair takes the
byte path (``prescan``: no JSON parse, no re-encode); the rest is parsed once, watched,
and rewritten only when a repair changed it.
"""

from __future__ import annotations

from typing import Any

from serving.guard.repair.hooks import Repairs, ReplyRepair
from serving.guard.repair.kinds import header_value
from serving.guard.repair.prescan import plain_content
from serving.guard.repair.stream import call_deltas, content_chunk
from serving.guard.sse import DONE, data_event, event_data, event_json
from serving.guard.watch import ReplyWatch


class StreamFixer:
    """The repairs of one streamed reply, event by event."""

    def __init__(self, repairs: Repairs, fix: ReplyRepair, watch: ReplyWatch) -> None:
        self._repairs = repairs
        self._fix = fix
        self._watch = watch
        self._template: dict[str, Any] = {}
        self.done = False  # ``[DONE]`` seen

    @property
    def looping(self) -> bool:
        """True once the reply's content shows a loop."""
        return self._fix.loops is not None and self._fix.loops.found is not None

    def _quiet(self) -> bool:
        salvage = self._fix.salvage
        return salvage is None or salvage.idle

    def event(self, event: bytes) -> tuple[list[bytes], dict[str, Any] | None]:
        """What to send for ``event``, and its chunk when it was parsed (else None).

        The chunk's own event, when sent, is the list's last item: a caller that changes the
        chunk afterwards (the reasoning mirror) re-encodes that one.
        """
        if self._quiet():
            text = plain_content(event)
            if text is not None:
                self._watch.text(text)
                if self._fix.loops is not None:
                    self._fix.loops.feed(text)
                return [event], None
        payload = event_data(event)
        chunk = None if payload is None else event_json(payload)
        if chunk is None:
            if payload == DONE:
                self.done = True
                return [*self.mark(), event], None
            return [event], None
        self._watch.chunk(chunk)
        return self._chunk(event, chunk), chunk

    def _chunk(self, event: bytes, chunk: dict[str, Any]) -> list[bytes]:
        choices = chunk.get("choices")
        choice = choices[0] if isinstance(choices, list) and len(choices) == 1 else None
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            return [event]
        self._template = chunk
        delta = choice.get("delta")
        delta = delta if isinstance(delta, dict) else {}
        content = delta.get("content")
        out: list[bytes] = []
        changed = False
        if isinstance(content, str) and content:
            if self._fix.loops is not None:
                self._fix.loops.feed(content)
            salvage = self._fix.salvage
            if salvage is not None:
                passed = salvage.take(content)
                if passed != content:
                    changed = True
                    delta["content"] = passed
                if salvage.gave_up is not None and not salvage.counted:
                    salvage.counted = True
                    self._repairs.refused(self._fix, salvage.gave_up)
        if choice.get("finish_reason") is not None and self._fix.salvage is not None:
            finish = choice.get("finish_reason")
            out.extend(self._settle(chunk, choice))
            changed = changed or choice.get("finish_reason") != finish
        if not changed:
            return [*out, event]
        if (
            delta.keys() <= {"content"}
            and not delta.get("content")
            and (choice.get("finish_reason") is None)
        ):
            return out  # an emptied content delta: nothing to send
        return [*out, data_event(chunk)]

    def _settle(self, chunk: dict[str, Any], choice: dict[str, Any]) -> list[bytes]:
        """The finish of choice 0: held markup becomes calls, or goes out as text."""
        salvage = self._fix.salvage
        if salvage is None:
            return []
        outcome, rest = salvage.settle()
        out: list[bytes] = []
        if outcome is not None and outcome.calls:
            delta = {"tool_calls": call_deltas(outcome.calls)}
            out.append(data_event(content_chunk(chunk, delta)))
            choice["finish_reason"] = "tool_calls"
            self._repairs.salvaged(self._fix, len(outcome.calls))
        elif outcome is not None:
            self._repairs.refused(self._fix, outcome.reason or "not a call")
        if rest:
            out.insert(0, data_event(content_chunk(chunk, {"content": rest})))
        return out

    def flush(self) -> list[bytes]:
        """A stream that ended without a finish: what was held goes out as text."""
        salvage = self._fix.salvage
        if salvage is None:
            return []
        _, rest = salvage.settle()
        return [data_event(content_chunk(self._template, {"content": rest}))] if rest else []

    def mark(self) -> list[bytes]:
        """The reply's repairs as an SSE comment before ``[DONE]`` (clients skip comments).

        A stream's headers left before its repairs were made; this names them at its end.
        """
        if not self._fix.done:
            return []
        return [b": x-cmpfleet-repaired " + header_value(self._fix.done) + b"\n\n"]

    def cut_events(self) -> list[bytes]:
        """The clean end of a cut stream: ``finish_reason: "length"``, then ``[DONE]``."""
        chunk = content_chunk(self._template, {})
        chunk["choices"][0]["finish_reason"] = "length"
        return [*self.flush(), data_event(chunk), *self.mark(), b"data: [DONE]\n\n"]
