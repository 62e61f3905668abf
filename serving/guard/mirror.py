"""Mirror the reasoning field for clients that read the other name.

The sm_80 builds return the reasoning in ``reasoning``; DeepSeek's API and most clients
(opencode among them) read ``reasoning_content``, see no thinking, and may show or send
back the wrong thing. ``mirror_reasoning = "reasoning_content"`` copies ``reasoning`` into
``reasoning_content`` when only the first is set, in whole messages and in every streamed
delta; ``"reasoning"`` copies the other way, ``"both"`` fills whichever is missing.
Nothing else in the reply changes.
"""

from __future__ import annotations

from typing import Any

REASONING = "reasoning"
REASONING_CONTENT = "reasoning_content"


def mirror_fields(part: dict[str, Any], mode: str) -> bool:
    """Copy the reasoning into the missing field of one message or delta; True if changed."""
    if not mode:
        return False
    have = {name: part.get(name) for name in (REASONING, REASONING_CONTENT)}
    for target, source in ((REASONING_CONTENT, REASONING), (REASONING, REASONING_CONTENT)):
        wanted = mode in (target, "both")
        if wanted and have[target] is None and isinstance(have[source], str):
            part[target] = have[source]
            return True
    return False


def mirror_choices(body: dict[str, Any], mode: str, part: str) -> bool:
    """Mirror in each choice's ``part`` (``message`` or ``delta``); True if any changed."""
    changed = False
    choices = body.get("choices")
    if not mode or not isinstance(choices, list):
        return False
    for choice in choices:
        inner = choice.get(part) if isinstance(choice, dict) else None
        if isinstance(inner, dict) and mirror_fields(inner, mode):
            changed = True
    return changed
