"""Reasoning field: thinking on, and the reasoning must arrive where clients read it.

DeepSeek's API and most clients read ``reasoning_content``; the sm_80 vLLM forks return
``reasoning`` (Schaka's patch 0023 adds the copy). Reasoning inside ``content`` (no
``--reasoning-parser``, or an unclosed think tag) is sent back as history by agent
harnesses and poisons the context.
"""

from __future__ import annotations

from typing import Any

from serving.canary.model import Outcome, Verdict

NAME = "reasoning_field"
UNIT = "chars"
EFFORT = "high"
ADVICE_CONTENT = (
    "reasoning leaks into content: serve with --reasoning-parser (deepseek_v4, deepseek_v41 "
    "on V4.1) and apply the empty think-tag fix; clients must send thinking and "
    "reasoning_effort on every request"
)
ADVICE_FIELD = (
    "reasoning arrives only in 'reasoning': clients reading reasoning_content see none; "
    "apply the patch that also emits reasoning_content (Schaka 0023) or point the client at it"
)
ADVICE_NONE = (
    "no reasoning came back with thinking on: check --reasoning-parser and that the chat "
    "template honours chat_template_kwargs thinking"
)


def reasoning_request() -> dict[str, Any]:
    """Chat-request fields (no model): thinking on with an explicit effort, as the seeds advise."""
    return {
        "messages": [{"role": "user", "content": "Is seventeen a prime number? Answer yes or no."}],
        "chat_template_kwargs": {"thinking": True, "reasoning_effort": EFFORT},
        "reasoning_effort": EFFORT,
        "temperature": 0,
    }


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def judge_reasoning(message: dict[str, Any]) -> Verdict:
    """Pass: reasoning in ``reasoning_content`` and none of it (nor ``</think>``) in content."""
    content = _text(message.get("content"))
    in_content = _text(message.get("reasoning_content"))
    in_reasoning = _text(message.get("reasoning"))
    if "</think>" in content or "<think>" in content:
        return Verdict(Outcome.FAIL, 0.0, "a think tag is in content", ADVICE_CONTENT)
    for reasoning in (in_content, in_reasoning):
        if reasoning and reasoning.strip() and reasoning.strip() in content:
            return Verdict(
                Outcome.FAIL, 0.0, "the reasoning is repeated in content", ADVICE_CONTENT
            )
    if in_content.strip():
        return Verdict(
            Outcome.PASS, float(len(in_content)), "reasoning arrived in reasoning_content"
        )
    if in_reasoning.strip():
        return Verdict(
            Outcome.WARN, float(len(in_reasoning)), "reasoning only in 'reasoning'", ADVICE_FIELD
        )
    return Verdict(Outcome.FAIL, 0.0, "no reasoning field in the reply", ADVICE_NONE)
