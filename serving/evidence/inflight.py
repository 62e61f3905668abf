"""The requests in flight at a crash: their depth in tokens and session ids, never text.

Two sources. vLLM v1 dumps the scheduler's output when its engine core dies
(``dump_input.py``: "Dumping scheduler output for model execution: SchedulerOutput(
scheduled_new_reqs=[NewRequestData(req_id=4,prompt_token_ids_len=3699,...``), with the
prompt already anonymised to its length; and the traffic guard, when it runs, knows each
session's last depth. Only ids and numbers are kept: no prompt text ever enters a bundle.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_NEW_REQUEST = re.compile(r"req_id=([\w.:-]+?),\s*prompt_token_ids_len=(\d+)")
_DUMP = re.compile(r"Dumping scheduler output")


@dataclass(frozen=True, slots=True)
class InFlight:
    """One request (or session) and its depth in tokens."""

    id: str
    depth_tokens: int
    source: str  # "engine" (the scheduler dump) or "guard" (a session's last depth)

    def as_dict(self) -> dict[str, Any]:
        """The bundle's form."""
        return {"id": self.id, "depth_tokens": self.depth_tokens, "source": self.source}


def from_engine_log(lines: Iterable[str]) -> tuple[InFlight, ...]:
    """The requests of the last scheduler dump in ``lines`` (empty without one)."""
    found: tuple[InFlight, ...] = ()
    for line in lines:
        if _DUMP.search(line):
            found = tuple(
                InFlight(match.group(1), int(match.group(2)), "engine")
                for match in _NEW_REQUEST.finditer(line)
            )
    return found


def from_guard(sessions: Iterable[Mapping[str, Any]]) -> tuple[InFlight, ...]:
    """Each guard session's id and last depth (the guard's overview rows)."""
    found: list[InFlight] = []
    for row in sessions:
        depth = row.get("depth_tokens")
        ident = row.get("id") or row.get("session")
        if isinstance(depth, int) and depth > 0 and ident:
            found.append(InFlight(str(ident), depth, "guard"))
    return tuple(found)


def deepest(items: Iterable[InFlight]) -> int | None:
    """The deepest request's tokens (None when nothing was in flight)."""
    depths = [item.depth_tokens for item in items]
    return max(depths) if depths else None


def without_prompts(line: str) -> str:
    """A log line with any prompt text cut (vLLM's request logger prints the prompt)."""
    return re.sub(r"prompt: (?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", "prompt: <removed>", line)
