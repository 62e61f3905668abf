"""What one reply said, gathered as it streams past, for the shared detectors.

The guard never changes a reply for the watch: it only reads each delta (or the whole
message) and, at the end, asks ``serving.detectors`` what signs it shows. Choice 0 is
watched (agents ask for one); usage is taken from wherever the engine puts it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from serving.detectors import Reply, Sign, signs_of, thinking_asked


@dataclass(frozen=True, slots=True)
class Usage:
    """The engine's token counts for one request."""

    prompt_tokens: int
    completion_tokens: int


def usage_of(body: Mapping[str, Any]) -> Usage | None:
    """``usage`` of a response or chunk, when it carries one."""
    usage = body.get("usage")
    if not isinstance(usage, Mapping):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return Usage(prompt, completion)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


@dataclass
class ReplyWatch:
    """Accumulates choice 0 of one reply; ``signs`` judges it at the end."""

    tools_offered: bool
    thinking_requested: bool
    repeats: int
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    made_call: bool = False
    usage: Usage | None = None
    seen: bool = False  # any choice arrived

    @classmethod
    def for_request(cls, request: Mapping[str, Any], repeats: int) -> ReplyWatch:
        """A watch for the reply to ``request`` (as the engine saw it, pins included)."""
        return cls(bool(request.get("tools")), thinking_asked(request), repeats)

    def _part(self, part: Mapping[str, Any]) -> None:
        self.seen = True
        self.content.append(_text(part.get("content")) or _text(part.get("text")))
        reasoning = part.get("reasoning")
        if not isinstance(reasoning, str):
            reasoning = part.get("reasoning_content")
        self.reasoning.append(_text(reasoning))
        if part.get("tool_calls"):
            self.made_call = True

    def text(self, content: str) -> None:
        """A chunk the byte pre-scan found to hold only this content delta."""
        self.seen = True
        self.content.append(content)

    def chunk(self, body: Mapping[str, Any]) -> None:
        """One streamed chunk (``chat.completion.chunk`` or a completion's)."""
        self._take(body, "delta")

    def whole(self, body: Mapping[str, Any]) -> None:
        """A whole (non-streamed) response."""
        self._take(body, "message")

    def _take(self, body: Mapping[str, Any], part: str) -> None:
        """Usage, and choice 0's ``part`` (a completion's choice itself: it has ``text``)."""
        self.usage = usage_of(body) or self.usage
        choice = self._first_choice(body)
        if choice is None:
            return
        inner = choice.get(part)
        self._part(inner if isinstance(inner, Mapping) else choice)

    @staticmethod
    def _first_choice(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        choices = body.get("choices")
        if not isinstance(choices, list):
            return None
        for choice in choices:
            if isinstance(choice, Mapping) and choice.get("index", 0) == 0:
                return choice
        return None

    def signs(self) -> frozenset[Sign]:
        """The signs the reply shows (none when no choice came back)."""
        if not self.seen:
            return frozenset()
        reply = Reply(
            content="".join(self.content),
            reasoning="".join(self.reasoning),
            made_call=self.made_call,
            tools_offered=self.tools_offered,
            thinking_requested=self.thinking_requested,
        )
        return signs_of(reply, self.repeats)
