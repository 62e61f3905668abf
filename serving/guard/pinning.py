"""Pins: request fields set on every request, so no agent session drifts for lack of one.

The seeds' mitigation against the "Let me..." phrase lock and the empty think blocks is to
send ``chat_template_kwargs`` with ``thinking`` and an explicit ``reasoning_effort`` on
every request; one client setting per agent is fragile, a pin at the guard is not. A pin
is set where the client left it out; tables merge key by key (a client's own
``chat_template_kwargs`` keeps its other keys and gains the pinned ones). ``override``
replaces what the client sent.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

# Fields only a chat request has: a pin of them is left off a plain completion.
CHAT_ONLY = frozenset({"chat_template_kwargs", "tools", "tool_choice", "parallel_tool_calls"})


def apply_pins(
    request: dict[str, Any], pins: Mapping[str, Any], override: bool, chat: bool = True
) -> list[str]:
    """Set ``pins`` in ``request`` (in place); the dotted paths that were set or replaced."""
    changed: list[str] = []
    for key, value in pins.items():
        if not chat and key in CHAT_ONLY:
            continue
        _pin(request, key, value, override, key, changed)
    return changed


def _pin(
    target: dict[str, Any], key: str, value: Any, override: bool, path: str, changed: list[str]
) -> None:
    present = target.get(key)
    if isinstance(value, Mapping) and isinstance(present, dict):
        for inner, inner_value in value.items():
            _pin(present, inner, inner_value, override, f"{path}.{inner}", changed)
        return
    if key in target and present is not None and not override:
        return
    if key in target and present == value:
        return
    target[key] = copy.deepcopy(value)
    changed.append(path)
