"""Reasoning field: thinking on, and the reasoning must arrive where clients read it.

DeepSeek's API and most clients read ``reasoning_content``; the sm_80 vLLM forks return
``reasoning`` (Schaka's patch 0023 adds the copy). A recipe says which its build returns
(``expected_reasoning_field``; the DeepSeek presets say ``reasoning``), so a correct rig
passes instead of warning forever; without one, ``reasoning_content`` is expected.
Reasoning inside ``content`` (no ``--reasoning-parser``, or an unclosed think tag) is sent
back as history by agent harnesses and poisons the context: that always fails.
"""

from __future__ import annotations

from typing import Any

from serving.canary.model import Outcome, Verdict
from serving.detectors import reasoning_in_content

NAME = "reasoning_field"
STANDARD = "reasoning_content"
FIELDS = ("reasoning_content", "reasoning")
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
ADVICE_EXPECTED = (
    "reasoning arrives in 'reasoning_content', not in 'reasoning' as the recipe expects: "
    'set expected_reasoning_field = "reasoning_content" if this build is meant to, or '
    "check which build runs"
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


def judge_reasoning(message: dict[str, Any], expected: str = STANDARD) -> Verdict:
    """Pass: reasoning in the ``expected`` field and none of it (nor ``</think>``) in content."""
    content = _text(message.get("content"))
    fields = {name: _text(message.get(name)) for name in FIELDS}
    leak = reasoning_in_content(content, fields.values())
    if leak is not None:
        return Verdict(Outcome.FAIL, 0.0, leak, ADVICE_CONTENT)
    expected = expected if expected in FIELDS else STANDARD
    other = next(name for name in FIELDS if name != expected)
    if fields[expected].strip():
        return Verdict(
            Outcome.PASS, float(len(fields[expected])), f"reasoning arrived in {expected}"
        )
    if fields[other].strip():
        advice = ADVICE_FIELD if expected == STANDARD else ADVICE_EXPECTED
        return Verdict(
            Outcome.WARN, float(len(fields[other])), f"reasoning only in '{other}'", advice
        )
    return Verdict(Outcome.FAIL, 0.0, "no reasoning field in the reply", ADVICE_NONE)
