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
# Request fields a chat template renders into the prompt besides the messages (vLLM's
# chat request: tool schemas, RAG documents, template variables; ``functions`` is the
# legacy form of tools).
RENDERED_FIELDS = ("tools", "functions", "documents", "chat_template_kwargs")


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
    source: str = "chars"  # chars | tokenize | token_ids | usage | estimate


def _text(value: object) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(_text(item) for item in value)
    if isinstance(value, Mapping):
        return sum(_text(item) for item in value.values())
    return 0


def token_ids(prompt: object) -> int | None:
    """A completions prompt given as token IDs: its length (a batch's longest); else None.

    Each ID is one token: counted exactly, with no tokenizer (issue 36: such a prompt was
    never counted, a way past the cap).
    """
    if isinstance(prompt, list) and prompt:
        if all(isinstance(item, int) for item in prompt):
            return len(prompt)
        if all(isinstance(item, list) and all(isinstance(i, int) for i in item) for item in prompt):
            return max(len(item) for item in prompt)
    return None


def prompt_chars(request: Mapping[str, Any]) -> int:
    """An upper bound on the prompt's tokens: its characters plus the template's tokens.

    Every field the engine renders into the prompt counts: the messages or the prompt (token
    IDs one each), a completion's ``suffix``, and the structured fields a chat template
    renders (``RENDERED_FIELDS``: tools, documents ...) by their JSON's length.
    """
    messages = request.get("messages")
    if isinstance(messages, list):
        chars = sum(_text(message) for message in messages)
        chars += TEMPLATE_TOKENS_PER_MESSAGE * len(messages)
    else:
        prompt = request.get("prompt")
        ids = token_ids(prompt)
        chars = ids if ids is not None else _text(prompt)
        chars += _text(request.get("suffix"))
    for name in RENDERED_FIELDS:
        value = request.get(name)
        if value:
            chars += len(json.dumps(value, default=str))
    return chars


def rendered_tokens(request: Mapping[str, Any]) -> int:
    """A floor for the fields beside the messages (four characters a token).

    Taken with the tokenizer's count (the larger wins): an engine's ``/tokenize`` may not
    render every field its chat request does (``documents``), and what it leaves out
    must not be a way past the cap.
    """
    chars = 0
    for name in RENDERED_FIELDS:
        value = request.get(name)
        if value:
            chars += len(json.dumps(value, default=str))
    return chars // CHARS_PER_TOKEN_ESTIMATE


def may_exceed(request: Mapping[str, Any], cap: int) -> bool:
    """True when only the tokenizer can tell whether the prompt is over ``cap``.

    A client's own ``chat_template`` can render any length from a short request: always.
    """
    if request.get("chat_template") is not None:
        return True
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
        for key in (*RENDERED_FIELDS, "chat_template", "continue_final_message"):
            if request.get(key) is not None:
                body[key] = request[key]
    else:
        body["prompt"] = request.get("prompt", "")
    return body
