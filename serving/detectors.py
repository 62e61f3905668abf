"""Signs of a sick reply on these builds, found by pure functions over its text.

One implementation for everyone who reads what the engine says: the canaries judge their
own probes with it, the log signatures count the same tool-call markup in the engine log,
and the traffic guard (``serving.guard``) watches live agent traffic with it. The signs
are the daily failures the field notes report for DeepSeek V4 / V4.1 on the sm_80 forks
(``docs/domain.md``):

- ``dsml_markup``: a tool call returned as raw DSML (``<\uff5cDSML\uff5cinvoke ...>``,
  fullwidth bars) or a generic XML idiom in ``content`` instead of parsed ``tool_calls`` (a
  parser or template gap): the harness shows it to the user and never runs the call.
- ``reasoning_in_content``: think tags, or the reasoning itself, in ``content``: agents
  send it back as history and poison the context.
- ``think_unclosed`` / ``think_empty``: a think block opened and never closed, or empty
  (``<think></think>``, or thinking asked for and nothing came back): the empty blocks pile
  up in the history and the thinking rate decays over a session.
- ``announced_no_call``: "Let me check the logs." with tools offered and no call made:
  the first step of the "Let me..." loop past about 100k tokens.
- ``repeated_lines``: the same line (or sentence) again and again in one reply.

Nothing here does I/O or keeps state: each function takes text and answers.
"""

from __future__ import annotations

import enum
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DSML_BAR = "\uff5c"  # the fullwidth bar DeepSeek's tool-call markup uses
# Opening markers of tool-call markup that should have been parsed: DeepSeek's DSML (with
# its wrapper variants ``_tool_calls``, ``calls``), the same with ASCII bars, and the
# generic XML idioms the model drifts into near the context limit.
MARKUP_MARKERS = (
    f"<{DSML_BAR}DSML{DSML_BAR}",
    "<|DSML|",
    "<invoke",
    "</invoke",
    "<tool_calls",
    "<function_calls",
)
MARKUP_PATTERN = "|".join(re.escape(marker) for marker in MARKUP_MARKERS)
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
_EMPTY_THINK = re.compile(r"<think>\s*</think>")
# "Let me check ...", "I'll look at ...", "Now I will run ...": an announced action.
_ANNOUNCE = re.compile(
    r"(?i)\b(?:let me|let's|i'll|i will|i am going to|i'm going to|i need to|now i)\s+"
    r"(?:\w+\s+){0,2}?"
    r"(check|look|read|open|run|search|call|use|examine|inspect|create|write|edit|fix|"
    r"update|find|list|try|verify|test|grep|view|see|explore|investigate|execute|start)\b"
)
_FENCE = re.compile(r"^\s*(```|~~~)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# A line must be this long to count as a repeat: "}" or "---" thrice is not a loop.
MIN_REPEATED_CHARS = 12
REPEATS = 3
# Only the reply's tail can announce the call it failed to make.
ANNOUNCE_TAIL_CHARS = 400


class Sign(enum.StrEnum):
    """A sign a reply can show (the label of the guard's and the canaries' counters)."""

    DSML_MARKUP = "dsml_markup"
    REASONING_IN_CONTENT = "reasoning_in_content"
    THINK_UNCLOSED = "think_unclosed"
    THINK_EMPTY = "think_empty"
    ANNOUNCED_NO_CALL = "announced_no_call"
    REPEATED_LINES = "repeated_lines"


# Leaks put what the client must not see into what it sends back; loops are the model
# stuck in a phrase. The dashboard and the alerts count them as two families.
LEAKS = frozenset(
    {Sign.DSML_MARKUP, Sign.REASONING_IN_CONTENT, Sign.THINK_UNCLOSED, Sign.THINK_EMPTY}
)
LOOPS = frozenset({Sign.ANNOUNCED_NO_CALL, Sign.REPEATED_LINES})


def tool_markup(content: object) -> str | None:
    """The first tool-call markup marker in ``content`` (None: none, or not text)."""
    if not isinstance(content, str):
        return None
    found = [(content.find(marker), marker) for marker in MARKUP_MARKERS if marker in content]
    return min(found)[1] if found else None


def reasoning_in_content(content: object, reasoning: Iterable[object] = ()) -> str | None:
    """Why the reasoning is in ``content`` (a think tag, or the reasoning repeated); None."""
    if not isinstance(content, str) or not content:
        return None
    if THINK_OPEN in content or THINK_CLOSE in content:
        return "a think tag is in content"
    for text in reasoning:
        if isinstance(text, str) and text.strip() and text.strip() in content:
            return "the reasoning is repeated in content"
    return None


def think_problem(content: object, reasoning: str, thinking_requested: bool) -> Sign | None:
    """An unclosed or empty think block (None: fine, or thinking was not asked for).

    ``reasoning`` is the reasoning field's text (either name); an empty one with thinking
    asked for is an empty think block the parser swallowed.
    """
    text = content if isinstance(content, str) else ""
    opened = text.rfind(THINK_OPEN)
    if opened >= 0 and text.find(THINK_CLOSE, opened) < 0:
        return Sign.THINK_UNCLOSED
    if _EMPTY_THINK.search(text):
        return Sign.THINK_EMPTY
    if thinking_requested and not reasoning.strip() and THINK_CLOSE not in text:
        return Sign.THINK_EMPTY
    return None


def announced_without_call(content: object, made_call: bool) -> str | None:
    """The announcing phrase ("Let me check") of a reply that then made no tool call."""
    if made_call or not isinstance(content, str):
        return None
    match = _ANNOUNCE.search(content[-ANNOUNCE_TAIL_CHARS:])
    return None if match is None else match.group(0)


def _prose_lines(content: str) -> list[str]:
    """Lines outside fenced code blocks (code repeats lines legitimately), stripped."""
    lines: list[str] = []
    in_code = False
    for raw in content.splitlines():
        if _FENCE.match(raw):
            in_code = not in_code
            continue
        if not in_code and raw.strip():
            lines.append(raw.strip())
    return lines


def repeated_line(content: object, repeats: int = REPEATS) -> tuple[str, int] | None:
    """The line or sentence said most often, when said ``repeats`` times or more."""
    if not isinstance(content, str):
        return None
    sentences: Counter[str] = Counter()
    for line in _prose_lines(content):
        for piece in _SENTENCE_END.split(line):
            if len(piece.strip()) >= MIN_REPEATED_CHARS:
                sentences[piece.strip()] += 1
    if not sentences:
        return None
    text, count = sentences.most_common(1)[0]
    return (text, count) if count >= repeats else None


@dataclass(frozen=True, slots=True)
class Reply:
    """What one reply (one choice) said, as the detectors read it."""

    content: str = ""
    reasoning: str = ""  # ``reasoning`` or ``reasoning_content``, whichever came
    made_call: bool = False  # parsed ``tool_calls`` came back
    tools_offered: bool = False  # the request declared tools
    thinking_requested: bool = False  # the request asked for thinking


def signs_of(reply: Reply, repeats: int = REPEATS) -> frozenset[Sign]:
    """Every sign ``reply`` shows."""
    found: set[Sign] = set()
    if tool_markup(reply.content) is not None:
        found.add(Sign.DSML_MARKUP)
    if reasoning_in_content(reply.content, (reply.reasoning,)) is not None:
        found.add(Sign.REASONING_IN_CONTENT)
    think = think_problem(reply.content, reply.reasoning, reply.thinking_requested)
    if think is not None:
        found.add(think)
    if reply.tools_offered and announced_without_call(reply.content, reply.made_call):
        found.add(Sign.ANNOUNCED_NO_CALL)
    if repeated_line(reply.content, repeats) is not None:
        found.add(Sign.REPEATED_LINES)
    return frozenset(found)


def thinking_asked(request: Mapping[str, Any]) -> bool:
    """True when a chat request asks for thinking (``chat_template_kwargs``)."""
    kwargs = request.get("chat_template_kwargs")
    if not isinstance(kwargs, Mapping):
        return False
    return any(kwargs.get(key) is True for key in ("thinking", "enable_thinking"))
