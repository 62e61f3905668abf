"""History hygiene: the assistant turns of an incoming request, cleaned before the engine.

The owners' root cause of the V4 / V4.1 loops is not the leak itself but the agent sending
it back: leaked reasoning and raw DSML go back as history, poison the context and come back
worse (Schaka, 2026-09-02; a V4.1 session that once echoes a hybrid call keeps writing
them: Zanooda v41/0014). So each assistant turn loses its think blocks (with what they
wrap), an unclosed think block, the reasoning before a stray ``</think>`` and raw tool-call
markup; markup that was a real call becomes the turn's ``tool_calls`` when salvage
(``serving.guard.repair.salvage``) accepts it. User turns and tool results are never
touched: they are what the person and the tools said.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from serving.detectors import THINK_CLOSE, THINK_OPEN
from serving.guard.repair.salvage import declared_tools, markup_start, salvage, strip_markup

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)


def clean_text(
    text: str, tools: Mapping[str, Mapping[str, Any]]
) -> tuple[str, list[dict[str, Any]]]:
    """One assistant text cleaned, and the calls salvaged from its markup."""
    cleaned = _THINK_BLOCK.sub("", text)
    stray_close = cleaned.rfind(THINK_CLOSE)
    if stray_close >= 0:  # no reasoning parser: the reasoning, then its end tag, leaked
        cleaned = cleaned[stray_close + len(THINK_CLOSE) :]
    opened = cleaned.find(THINK_OPEN)
    if opened >= 0:  # a think block never closed: all of it is reasoning
        cleaned = cleaned[:opened]
    calls: list[dict[str, Any]] = []
    if markup_start(cleaned) is not None:
        outcome = salvage(cleaned, tools)
        if outcome.calls:
            calls = list(outcome.calls)
            cleaned = outcome.prefix
        else:
            cleaned = strip_markup(cleaned)
    if cleaned != text:
        cleaned = cleaned.strip()
    return cleaned, calls


def _needs_look(text: str) -> bool:
    return "<" in text


def _clean_parts(parts: list[Any]) -> tuple[list[Any], bool]:
    """A list of content parts with each text part cleaned (markup only dropped)."""
    cleaned: list[Any] = []
    changed = False
    for part in parts:
        text = part.get("text") if isinstance(part, dict) else None
        new = text
        if isinstance(text, str) and _needs_look(text):
            new, _ = clean_text(text, {})  # no tools: a part's markup is dropped, not moved
        if new != text:
            cleaned.append({**part, "text": new})
            changed = True
        else:
            cleaned.append(part)
    return cleaned, changed


def clean_history(request: dict[str, Any]) -> int:
    """Clean ``request``'s assistant turns in place; the number of turns changed."""
    messages = request.get("messages")
    if not isinstance(messages, list):
        return 0
    tools: dict[str, dict[str, Any]] | None = None
    changed = 0
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, list):  # content parts: each text part cleaned alone
            parts, changed_parts = _clean_parts(content)
            if changed_parts:
                messages[index] = {**message, "content": parts}
                changed += 1
            continue
        if not isinstance(content, str) or not _needs_look(content):
            continue
        if tools is None:
            tools = declared_tools(request)
        cleaned, calls = clean_text(content, tools)
        if cleaned == content and not calls:
            continue
        turn = dict(message)
        turn["content"] = cleaned
        if calls and not turn.get("tool_calls"):
            turn["tool_calls"] = calls
        messages[index] = turn
        changed += 1
    return changed
