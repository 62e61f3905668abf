"""Loops: an agent-style exchange, deep, where the next step must be a tool call.

Past about 100k tokens DeepSeek V4 builds were seen announcing a call ("Let me check run
progress.") without making it, over and over, or writing corrupt tool tags, worse with
DSpark. The request replays what an agent harness sends: a system prompt, the task, an
earlier call whose result is a long log (the depth), a second call and its short result,
and the user asking for the next check. The reply passes when it makes a parsed call to
the declared tool with JSON-object arguments; it fails when it announces a call it does
not make, repeats lines, or leaks call markup; answering in prose without the tool warns.
"""

from __future__ import annotations

import json
from typing import Any

from serving.canary.depth import filler, filler_words_for
from serving.canary.model import Outcome, Verdict
from serving.detectors import announced_without_call, repeated_line, tool_markup

NAME = "loop"
UNIT = "ratio"
TOOL_NAME = "get_run_status"
REPEATS_FAIL = 3
ADVICE_LOOP = (
    "the build loops instead of calling tools this deep: apply the repetition tripwires "
    "and nudge (Schaka 0020-0022), send chat_template_kwargs reasoning_effort on every "
    "request, and cap agent clients below the depth where it breaks (auto-compaction)"
)
ADVICE_PROSE = (
    "the model answered without calling the declared tool: check --enable-auto-tool-choice "
    "and --tool-call-parser, and whether it happens only this deep"
)
ADVICE_MARKUP = (
    "the tool call leaked as raw markup this deep: apply the parser patches (orphan invoke, "
    "wrapper variants) and the NaN-logit guard (vLLM #50183) for DSpark"
)
_SYSTEM = (
    "You are a build agent. Act through the tools: when a step needs a tool, call it; never "
    "describe a call instead of making it."
)


def _tools() -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": TOOL_NAME,
                "description": "Return the status of a build run.",
                "parameters": {
                    "type": "object",
                    "properties": {"run_id": {"type": "string", "description": "the run's id"}},
                    "required": ["run_id"],
                },
            },
        }
    ]


def _call(call_id: str, arguments: dict[str, str]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": TOOL_NAME, "arguments": json.dumps(arguments)},
    }


def loop_request(depth_tokens: int, seed: int) -> dict[str, Any]:
    """Chat-request fields (no model): the exchange, its first tool result ``depth`` long."""
    log = filler(filler_words_for(depth_tokens), seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": "The nightly build run nb-7 is slow. Watch it until it ends."},
        {"role": "assistant", "content": None, "tool_calls": [_call("call-1", {"run_id": "nb-7"})]},
        {"role": "tool", "tool_call_id": "call-1", "content": f"build log of run nb-7:\n{log}"},
        {"role": "assistant", "content": None, "tool_calls": [_call("call-2", {"run_id": "nb-7"})]},
        {"role": "tool", "tool_call_id": "call-2", "content": '{"status": "running"}'},
        {"role": "user", "content": "Check the status of run nb-7 again now."},
    ]
    return {
        "messages": messages,
        "tools": _tools(),
        "tool_choice": "auto",
        "temperature": 0,
        "max_tokens": 256,
    }


def _valid_call(call: object) -> bool:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or function.get("name") != TOOL_NAME:
        return False
    try:
        arguments = json.loads(function.get("arguments") or "")
    except (TypeError, json.JSONDecodeError):
        return False
    return isinstance(arguments, dict)


def judge_loop(message: dict[str, Any]) -> Verdict:
    """Figure 1 for a clean call, 0 for a loop, a leak or no call."""
    raw = message.get("content")
    content = raw if isinstance(raw, str) else ""
    calls = message.get("tool_calls") or []
    # The detectors the guard and the log signatures use (``serving.detectors``).
    line, repeats = repeated_line(content, REPEATS_FAIL) or ("", 0)
    details: dict[str, Any] = {"content_head": content[:200], "repeats": repeats}
    marker = tool_markup(content)
    if marker is not None:
        return Verdict(
            Outcome.FAIL, 0.0, f"the call leaked as raw markup ({marker.strip('<')}...)",
            ADVICE_MARKUP, details,
        )  # fmt: skip
    if repeats >= REPEATS_FAIL:
        return Verdict(
            Outcome.FAIL, 0.0, f"repeats {line[:60]!r} {repeats} times", ADVICE_LOOP, details
        )
    good = isinstance(calls, list) and any(_valid_call(call) for call in calls)
    if good:
        return Verdict(Outcome.PASS, 1.0, f"called {TOOL_NAME}", "", details)
    announced = announced_without_call(content, made_call=False)
    if announced is not None:
        return Verdict(
            Outcome.FAIL,
            0.0,
            f"announces a call it never makes ({announced!r}...)",
            ADVICE_LOOP,
            details,
        )
    return Verdict(Outcome.WARN, 0.0, "answered without calling the tool", ADVICE_PROSE, details)
