"""Tool-call parsing: one declared tool that the request needs called.

Pass when the reply carries parsed ``tool_calls`` naming the tool with JSON-object
arguments and ``content`` holds no call markup. DeepSeek V4 builds without the right
parser flags (or the orphan-invoke and wrapper-variant patches) return the call as raw
DSML text instead, which an agent harness shows to the user and never executes.
"""

from __future__ import annotations

import json
from typing import Any

from serving.canary.model import Outcome, Verdict
from serving.detectors import tool_markup

NAME = "tool_calls"
UNIT = "calls"
TOOL_NAME = "read_file"
ADVICE = (
    "serve with --enable-auto-tool-choice and the model's --tool-call-parser "
    "(deepseek_v4, deepseek_v41 on V4.1 builds), and apply the parser patches "
    "(orphan invoke, wrapper variants: Schaka 0009-0018, Zanooda v41 series)"
)


def tool_request(path: str = "/w/notes.txt") -> dict[str, Any]:
    """Chat-request fields (no model): one tool, a question only the tool can answer."""
    tool = {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": "Read a text file and return its contents.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "absolute path"}},
                "required": ["path"],
            },
        },
    }
    return {
        "messages": [{"role": "user", "content": f"Use the tool to read the file {path} for me."}],
        "tools": [tool],
        "tool_choice": "auto",
        "temperature": 0,
    }


def judge_tool_calls(message: dict[str, Any]) -> Verdict:
    """Judge one reply ``message`` (``choices[0].message``)."""
    marker = tool_markup(message.get("content"))
    calls = message.get("tool_calls") or []
    if marker is not None:
        return Verdict(
            Outcome.FAIL,
            0.0,
            f"the tool call leaked into content as raw markup ({marker.strip('<')}...)",
            ADVICE,
            {"content_head": str(message.get("content"))[:200]},
        )
    if not isinstance(calls, list) or not calls:
        return Verdict(
            Outcome.FAIL, 0.0, "no tool_calls in the reply to a request that needs one", ADVICE
        )
    good = 0
    problems: list[str] = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            problems.append("a call without a function")
            continue
        if function.get("name") != TOOL_NAME:
            problems.append(f"called {function.get('name')!r}, not {TOOL_NAME!r}")
            continue
        try:
            arguments = json.loads(function.get("arguments") or "")
        except (TypeError, json.JSONDecodeError):
            problems.append("arguments are not valid JSON")
            continue
        if not isinstance(arguments, dict) or "path" not in arguments:
            problems.append("arguments lack the required 'path'")
            continue
        good += 1
    if problems or good == 0:
        return Verdict(Outcome.FAIL, float(good), f"tool call malformed: {problems[0]}", ADVICE)
    return Verdict(
        Outcome.PASS, float(good), f"{good} parsed tool call(s) with valid JSON arguments"
    )
