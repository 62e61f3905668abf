"""Tool calls recovered from DSML markup that leaked into ``content``.

DeepSeek V4 / V4.1 write a call as DSML (fullwidth bars; ASCII bars on some builds)::

    <\uff5cDSML\uff5ctool_calls>
    <\uff5cDSML\uff5cinvoke name="bash">
    <\uff5cDSML\uff5cparameter name="command" string="true">ls</\uff5cDSML\uff5cparameter>
    </\uff5cDSML\uff5cinvoke>
    </\uff5cDSML\uff5ctool_calls>

``string="true"`` marks a raw string, ``string="false"`` a JSON value. When the engine's
parser misses it the whole call leaks as text. The variants the seeds report
(``docs/domain.md``): an orphan ``invoke`` with no wrapper (Schaka 0009), the
``_tool_calls`` wrapper (0018), the misspelled ``calls`` / ``_calls`` wrappers (Zanooda
v41/0012), hybrid XML/DSML (a plain ``<invoke name=...>``, or the tool's name fused into a
``<parameter name="TOOL">`` opener, closed in DSML: v41/0014) and headless calls (parameters
with no invoke at all: v41/0017).

The rules are the patches' (0010-0015, v41/0017), and stricter where prose could fool them:
a call is recovered only when the request declared the tool, its required arguments are
present and valid against its JSON schema, and the block is closed; a headless call only
when exactly one declared tool fits. Markup inside a code fence or inline code, or followed
by more text, is prose quoting the markup (documentation, a review of a parser): it is
never a call. Anything refused is left as it was, with the reason.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema_rs

_BAR = "[\uff5c|]"
WRAPPERS = frozenset({"tool_calls", "_tool_calls", "calls", "_calls", "function_calls"})
_TAG = re.compile(
    rf"<(/?)((?:{_BAR}DSML{_BAR})?)"
    r"(tool_calls|_tool_calls|calls|_calls|function_calls|invoke|parameter)"
    r"((?:\s+[A-Za-z_][\w-]*=\"[^\"<>]*\")*)\s*>"
)
_ATTR = re.compile(r'([A-Za-z_][\w-]*)="([^"<>]*)"')
_PARAM_CLOSE = re.compile(rf"</(?:{_BAR}DSML{_BAR})?parameter\s*>")
_FENCE = re.compile(r"^[ \t]*(```|~~~)", re.MULTILINE)
# A marker the text could still be growing into (``<``, ``<\uff5cDS``...): a stream holds it back.
MAX_MARKER_CHARS = 256  # an opening tag with its attributes (tool and parameter names)
_PLAIN_MARKERS = ("<invoke", "<tool_calls", "<function_calls", "<parameter")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What salvage made of a text: the calls, or why none (``reason``)."""

    found: bool  # markup was there (outside code)
    prefix: str = ""  # the text before the markup
    calls: tuple[dict[str, Any], ...] = ()  # OpenAI ``tool_calls``
    reason: str | None = None  # why the markup stayed text
    variant: str = ""  # which variant it was (wrapper, orphan, hybrid, fused, headless)


@dataclass
class _Invoke:
    name: str | None  # None: headless
    params: dict[str, tuple[str, str | None]] = field(default_factory=dict)


class _Refused(Exception):
    """The markup is not a call (the message is the counted reason)."""


def declared_tools(request: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The request's function tools: name -> JSON schema of the parameters."""
    tools: dict[str, dict[str, Any]] = {}
    for tool in request.get("tools") or []:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        schema = function.get("parameters")
        tools[function["name"]] = dict(schema) if isinstance(schema, Mapping) else {}
    return tools


def _in_code(text: str, at: int) -> bool:
    """True when ``at`` is inside a fenced block or an inline code span of ``text``."""
    if len(_FENCE.findall(text, 0, at)) % 2 == 1:
        return True
    line_start = text.rfind("\n", 0, at) + 1
    return text.count("`", line_start, at) % 2 == 1


def markup_start(text: str) -> int | None:
    """Where the first opening markup tag outside code starts (None: no markup)."""
    if "<" not in text:
        return None
    for match in _TAG.finditer(text):
        if not match.group(1) and not _in_code(text, match.start()):
            return match.start()
    return None


def maybe_marker_tail(text: str) -> int | None:
    """Where a marker may be starting at the end of ``text`` (a stream waits for more)."""
    at = text.rfind("<", max(0, len(text) - MAX_MARKER_CHARS))
    if at < 0 or ">" in text[at:]:
        return None
    tail = text[at:]
    dsml = ("<\uff5cDSML\uff5c", "<|DSML|")
    for marker in (*dsml, *_PLAIN_MARKERS):
        if marker.startswith(tail) or tail.startswith(marker):
            return at
    return None


def _attrs(raw: str) -> dict[str, str]:
    return dict(_ATTR.findall(raw))


def _parse(text: str, start: int, tools: Mapping[str, Any]) -> tuple[list[_Invoke], str]:
    """The invokes of the markup from ``start`` to the end of ``text``."""
    invokes: list[_Invoke] = []
    current: _Invoke | None = None
    wrapper: str | None = None
    variants: set[str] = set()
    pos = start
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        match = _TAG.match(text, pos)
        if match is None:
            raise _Refused("text after the markup" if invokes else "text inside the markup")
        closing, dsml, name, raw = match.group(1), match.group(2), match.group(3), match.group(4)
        attrs = _attrs(raw)
        pos = match.end()
        if name in WRAPPERS:
            if not closing:
                if wrapper is not None or current is not None:
                    raise _Refused("a wrapper inside a call")
                wrapper = name
                variants.add("wrapper" if name == "tool_calls" else f"wrapper {name}")
                continue
            if current is not None:
                if current.name is not None:
                    raise _Refused("the invoke is not closed")
                invokes.append(current)  # a headless call ends with the wrapper
                current = None
            wrapper = None
            continue
        if name == "invoke":
            if not closing:
                if current is not None:
                    raise _Refused("an invoke inside an invoke")
                if "name" not in attrs:
                    raise _Refused("an invoke without a name")
                current = _Invoke(attrs["name"])
                if not dsml:
                    variants.add("hybrid")
                elif wrapper is None:
                    variants.add("orphan")
                continue
            if current is None:
                raise _Refused("a close without an invoke")
            invokes.append(current)
            current = None
            continue
        if closing:
            raise _Refused("a stray parameter close")
        pname = attrs.get("name")
        if pname is None:
            raise _Refused("a parameter without a name")
        rest = text[pos:].lstrip()
        if current is None and pname in tools and rest.startswith("<") and _TAG.match(rest):
            current = _Invoke(pname)  # the tool's name fused into a parameter opener
            variants.add("fused")
            continue
        if current is None:
            current = _Invoke(None)
            variants.add("headless")
        close = _PARAM_CLOSE.search(text, pos)
        if close is None:
            raise _Refused("a parameter is not closed")
        current.params[pname] = (text[pos : close.start()], attrs.get("string"))
        pos = close.end()
    if current is not None or wrapper is not None:
        raise _Refused("the block is not closed")
    if not invokes:
        raise _Refused("no call in the markup")
    return invokes, ",".join(sorted(variants)) or "wrapper"


def _required(schema: Mapping[str, Any]) -> list[str]:
    required = schema.get("required")
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        return []  # a malformed ``required`` (patch 0014/0015): nothing is required
    return list(required)


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _value(raw: str, string: str | None, prop: object) -> Any:
    if string == "true":
        return raw
    kind = prop.get("type") if isinstance(prop, Mapping) else None
    if string == "false" or kind in ("integer", "number", "boolean", "object", "array", "null"):
        try:
            return json.loads(raw)
        except ValueError:
            if string == "false":
                raise _Refused("an argument is not valid JSON") from None
    return raw


def _arguments(invoke: _Invoke, schema: Mapping[str, Any]) -> dict[str, Any]:
    properties = _properties(schema)
    arguments = {
        name: _value(raw, string, properties.get(name))
        for name, (raw, string) in invoke.params.items()
    }
    missing = [name for name in _required(schema) if name not in arguments]
    if missing:
        raise _Refused(f"required argument {missing[0]!r} is missing")
    try:
        valid = jsonschema_rs.validator_for(dict(schema)).is_valid(arguments)
    except (ValueError, TypeError):
        raise _Refused("the tool's schema is not valid") from None
    if not valid:
        raise _Refused("the arguments do not fit the tool's schema")
    return arguments


def _headless_tool(invoke: _Invoke, tools: Mapping[str, Mapping[str, Any]]) -> str:
    names = set(invoke.params)
    fits = [
        name
        for name, schema in tools.items()
        if names <= set(_properties(schema)) and set(_required(schema)) <= names
    ]
    if len(fits) != 1:
        raise _Refused(f"a headless call fits {len(fits)} declared tools, not exactly one")
    return fits[0]


def tool_call(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """One OpenAI tool call, with an id in vLLM's form."""
    return {
        "id": f"chatcmpl-tool-{uuid.uuid4().hex[:16]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def salvage(text: str, tools: Mapping[str, Mapping[str, Any]], start: int | None = None) -> Outcome:
    """The calls in ``text``'s trailing markup, or why it stays text."""
    at = markup_start(text) if start is None else start
    if at is None:
        return Outcome(found=False, prefix=text)
    prefix = text[:at]
    if not tools:
        return Outcome(True, prefix, reason="the request declared no tools")
    try:
        invokes, variant = _parse(text, at, tools)
        calls: list[dict[str, Any]] = []
        for invoke in invokes:
            name = invoke.name if invoke.name is not None else _headless_tool(invoke, tools)
            if name not in tools:
                raise _Refused(f"tool {name[:64]!r} was not declared")
            calls.append(tool_call(name, _arguments(invoke, tools[name])))
    except _Refused as exc:
        return Outcome(True, prefix, reason=str(exc))
    return Outcome(True, prefix, tuple(calls), variant=variant)


def strip_markup(text: str) -> str:
    """``text`` without its markup: from the first tag to the last (history hygiene)."""
    at = markup_start(text)
    if at is None:
        return text
    last = None
    for match in _TAG.finditer(text, at):
        last = match
    end = last.end() if last is not None else len(text)
    closes = list(_PARAM_CLOSE.finditer(text, at))
    if closes and closes[-1].end() > end:
        end = closes[-1].end()
    return (text[:at] + text[end:]).strip()
