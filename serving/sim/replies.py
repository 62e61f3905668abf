"""What the simulated engine answers: OpenAI-shaped replies, optionally mangled or leaking DSML."""

from __future__ import annotations

import json
import random
import re
import uuid
from dataclasses import dataclass
from typing import Any

from serving.sim.defects import context_tokens, estimate_tokens
from serving.sim.leaks import MARKUP_MODES, markup
from serving.sim.options import SimOptions

_WORD = re.compile(r"[^\s,;()\[\]{}<>\"'`]+")
_CODE_CHARS = re.compile(r"^[A-Za-z0-9_./-]+$")
_PAD = ("and", "the", "story", "goes", "on")


@dataclass(frozen=True)
class Reply:
    """What the model "says" for one request."""

    content: str | None
    tool_calls: list[dict[str, Any]] | None
    reasoning: str | None
    reasoning_content: str | None = None


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


def prompt_tokens_of(request: dict[str, Any]) -> int:
    """A completion request's prompt in tokens, as usage and ``/tokenize`` report it.

    A chat's messages or a completion's ``prompt``, at characters / 4: cheap at any depth,
    so a 128k-token deep canary costs the simulation nothing.
    """
    messages = request.get("messages")
    if isinstance(messages, list):
        return context_tokens(messages, message_text)
    prompt = request.get("prompt")
    return estimate_tokens(prompt) if isinstance(prompt, str) else 0


def code_identifiers(text: str) -> list[str]:
    """Words that look like code, in order: snake_case, camelCase, with digits, paths, hex ids.

    All-capital words (acronyms, ``BEGIN``) are prose; trailing sentence punctuation is not
    part of the identifier.
    """
    found: list[str] = []
    for raw in _WORD.findall(text):
        word = raw.rstrip(".:!?")
        if not _CODE_CHARS.match(word):
            continue
        camel = any(ch.isupper() for ch in word[1:]) and any(ch.islower() for ch in word)
        looks_like_code = (
            "_" in word.strip("_") or "/" in word or any(ch.isdecimal() for ch in word) or camel
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


def _place_reasoning(reply: Reply, field: str) -> Reply:
    """Put the reasoning where the simulated build puts it (``--sim-reasoning-field``)."""
    thought = reply.reasoning
    if thought is None:
        return reply
    if field == "reasoning":
        return reply
    if field == "reasoning_content":
        return Reply(reply.content, reply.tool_calls, None, thought)
    if field == "content":  # no reasoning parser: the think text and its end tag leak
        return Reply(f"{thought}</think>{reply.content or ''}", reply.tool_calls, None)
    return Reply(reply.content, reply.tool_calls, thought, thought)


def _copied(identifiers: list[str], pct: float, rng: random.Random) -> list[str]:
    """The identifiers as the engine copies them: ``pct`` percent of them mangled."""
    wrong = set(rng.sample(range(len(identifiers)), round(len(identifiers) * pct / 100)))
    return [mangle(word) if i in wrong else word for i, word in enumerate(identifiers)]


def compose_reply(request: dict[str, Any], options: SimOptions, rng: random.Random) -> Reply:
    """The answer, its reasoning placed as the simulated build places it (and leaked)."""
    reply = _place_reasoning(_compose(request, options, rng), options.reasoning_field)
    if options.leak_mode == "reasoning":
        thought = reply.reasoning or reply.reasoning_content or "I think this over first."
        return Reply(f"{thought}</think>{reply.content or ''}", reply.tool_calls, None)
    if options.leak_mode == "empty-think":
        return Reply(
            f"<think></think>{reply.content or ''}",
            reply.tool_calls,
            reply.reasoning,
            reply.reasoning_content,
        )
    return reply


def _compose(request: dict[str, Any], options: SimOptions, rng: random.Random) -> Reply:
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
        mode = options.leak_mode if options.leak_mode in MARKUP_MODES else ""
        if options.leak_dsml or mode:
            text = markup(mode or "wrapper", name, arguments)
            return Reply(content=text, tool_calls=None, reasoning=reasoning)
        call = {
            "id": f"chatcmpl-tool-{uuid.uuid4().hex[:16]}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        return Reply(content=None, tool_calls=[call], reasoning=reasoning)
    if identifiers:
        copied = _copied(identifiers, options.corrupt_identifiers_pct, rng)
        if "per line" in prompt.lower():
            content = "\n".join(copied)
        else:
            content = "Here are the identifiers you gave me: " + ", ".join(copied) + "."
    else:
        content = (
            "This is the cmpfleet simulated engine. It answers every question the same way, "
            "at a steady pace, so that probes and canaries have something real to read."
        )
    return Reply(content=content, tool_calls=None, reasoning=reasoning)


def split_tokens(text: str, limit: int, ignore_eos: bool = False) -> list[str]:
    """Words with their trailing spaces: the "tokens" streamed one by one.

    ``ignore_eos`` (vLLM's sampling extra) keeps generating to ``limit``.
    """
    tokens = re.findall(r"\S+\s*", text)[: max(limit, 0)]
    if ignore_eos:
        if tokens and not tokens[-1][-1:].isspace():
            tokens[-1] += " "
        while len(tokens) < limit:
            tokens.append(_PAD[len(tokens) % len(_PAD)] + " ")
    return tokens
