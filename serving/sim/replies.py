"""What the simulated engine answers: OpenAI-shaped replies, optionally mangled or leaking DSML."""

from __future__ import annotations

import json
import random
import re
import uuid
from dataclasses import dataclass
from typing import Any

from serving.sim.options import SimOptions

_IDENTIFIER = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
_DSML = "\uff5cDSML\uff5c"  # the fullwidth bars DeepSeek's tool-call markup uses


@dataclass(frozen=True)
class Reply:
    """What the model "says" for one request."""

    content: str | None
    tool_calls: list[dict[str, Any]] | None
    reasoning: str | None


def message_text(message: dict[str, Any]) -> str:
    """A chat message's text, whether content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def code_identifiers(text: str) -> list[str]:
    """Identifiers that look like code (snake_case, camelCase, with digits), in order."""
    found: list[str] = []
    for word in _IDENTIFIER.findall(text):
        looks_like_code = (
            "_" in word.strip("_")
            or any(ch.isdigit() for ch in word)
            or any(ch.isupper() for ch in word[1:])
        )
        if looks_like_code and len(word) >= 3 and word not in found:
            found.append(word)
    return found


def mangle(identifier: str) -> str:
    """A plausible copying mistake: one character in the middle dropped."""
    middle = len(identifier) // 2
    return identifier[:middle] + identifier[middle + 1 :]


def _tool_arguments(tool: dict[str, Any], fallback: str) -> dict[str, Any]:
    parameters = tool.get("function", {}).get("parameters", {})
    properties = parameters.get("properties", {}) if isinstance(parameters, dict) else {}
    required = parameters.get("required", list(properties)) if isinstance(parameters, dict) else []
    return {name: fallback for name in required if isinstance(name, str)}


def compose_reply(request: dict[str, Any], options: SimOptions, rng: random.Random) -> Reply:
    """Build the answer: echo the prompt's identifiers, or call the first tool offered."""
    messages = request.get("messages") or []
    user_texts = [
        message_text(m) for m in messages if isinstance(m, dict) and m.get("role") == "user"
    ]
    prompt = user_texts[-1] if user_texts else ""
    identifiers = code_identifiers(prompt)
    kwargs = request.get("chat_template_kwargs") or {}
    thinking = bool(kwargs.get("thinking")) if isinstance(kwargs, dict) else False
    reasoning = "The user asked a question; I answer it briefly." if thinking else None
    tools = request.get("tools") or []
    if tools and request.get("tool_choice") != "none" and isinstance(tools[0], dict):
        tool = tools[0]
        name = str(tool.get("function", {}).get("name", "tool"))
        arguments = _tool_arguments(tool, identifiers[0] if identifiers else "ls")
        if options.leak_dsml:
            params = "".join(
                f'<{_DSML}parameter name="{key}" string="true">{value}</{_DSML}parameter>\n'
                for key, value in arguments.items()
            )
            markup = (
                f'<{_DSML}tool_calls>\n<{_DSML}invoke name="{name}">\n{params}'
                f"</{_DSML}invoke>\n</{_DSML}tool_calls>"
            )
            return Reply(content=markup, tool_calls=None, reasoning=reasoning)
        call = {
            "id": f"chatcmpl-tool-{uuid.uuid4().hex[:16]}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        return Reply(content=None, tool_calls=[call], reasoning=reasoning)
    if identifiers:
        copied = [
            mangle(word) if rng.random() * 100 < options.corrupt_identifiers_pct else word
            for word in identifiers
        ]
        content = "Here are the identifiers you gave me: " + ", ".join(copied) + "."
    else:
        content = (
            "This is the cmpfleet simulated engine. It answers every question the same way, "
            "at a steady pace, so that probes and canaries have something real to read."
        )
    return Reply(content=content, tool_calls=None, reasoning=reasoning)


def split_tokens(text: str, limit: int) -> list[str]:
    """Words with their trailing spaces: the "tokens" streamed one by one."""
    return re.findall(r"\S+\s*", text)[: max(limit, 0)]
