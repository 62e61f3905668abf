"""The context cap: refuse (or flag) a prompt deeper than ``max_context_tokens``.

The seeds' loops start at 120-140k tokens and the owners' fix is a client cap near 115k
with compaction: the guard enforces it for every client. The count is the engine's own
tokenizer (``/tokenize``), asked only when the prompt could be over the cap: a token
covers at least one character, so a prompt of fewer characters (plus the chat template's
few tokens per message) than the cap is under it, and most requests cost nothing extra.
When ``/tokenize`` does not answer, the session's last known depth (the engine's
``usage.prompt_tokens``) or four characters a token stand in.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Generous: DeepSeek's template adds a handful of special tokens per message.
TEMPLATE_TOKENS_PER_MESSAGE = 8
CHARS_PER_TOKEN_ESTIMATE = 4


class CapAction(enum.StrEnum):
    """What the cap does with one request."""

    PASS = "pass"  # noqa: S105 (a verdict, not a password)
    REFUSE = "refuse"
    WARN = "warn"


@dataclass(frozen=True, slots=True)
class CapVerdict:
    """The action, the prompt's size in tokens (None: not counted) and how it was known."""

    action: CapAction
    tokens: int | None = None
    source: str = "chars"  # chars | tokenize | usage | estimate


def _text(value: object) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(_text(item) for item in value)
    if isinstance(value, Mapping):
        return sum(_text(item) for item in value.values())
    return 0


def prompt_chars(request: Mapping[str, Any]) -> int:
    """An upper bound on the prompt's tokens: its characters plus the template's tokens."""
    messages = request.get("messages")
    if isinstance(messages, list):
        chars = sum(_text(message) for message in messages)
        chars += TEMPLATE_TOKENS_PER_MESSAGE * len(messages)
    else:
        chars = _text(request.get("prompt"))
    tools = request.get("tools")
    if tools:
        chars += len(json.dumps(tools))
    return chars


def may_exceed(request: Mapping[str, Any], cap: int) -> bool:
    """True when only the tokenizer can tell whether the prompt is over ``cap``."""
    return prompt_chars(request) > cap


def judge(tokens: int, cap: int, mode: str, source: str) -> CapVerdict:
    """Over the cap: refuse, or warn when ``cap_mode = "warn"``; else pass."""
    if tokens <= cap:
        return CapVerdict(CapAction.PASS, tokens, source)
    return CapVerdict(CapAction.WARN if mode == "warn" else CapAction.REFUSE, tokens, source)


def fallback_tokens(request: Mapping[str, Any], session_depth: int | None) -> int:
    """The prompt's size when the tokenizer did not answer: the best lower estimate."""
    estimate = prompt_chars(request) // CHARS_PER_TOKEN_ESTIMATE
    return max(estimate, session_depth or 0)


def tokenize_request(request: Mapping[str, Any], model: str | None) -> dict[str, Any]:
    """The ``/tokenize`` body that counts this request's prompt as the engine will."""
    body: dict[str, Any] = {}
    if model is not None:
        body["model"] = model
    if isinstance(request.get("messages"), list):
        body["messages"] = request["messages"]
        body["add_generation_prompt"] = True
        for key in ("tools", "chat_template_kwargs"):
            if request.get(key) is not None:
                body[key] = request[key]
    else:
        body["prompt"] = request.get("prompt", "")
    return body
