"""A request body as the guard reads it: a JSON object, or a 400 in OpenAI's shape.

Python's ``json`` takes what the engine's parser refuses and the guard would then re-send
changed: ``NaN`` and ``Infinity`` (and ``1e400``, which reads as infinity) go out again as
``NaN``/``Infinity``, which is not JSON. And a deeply nested array raised RecursionError,
a bare 500 (issue 36). Both are the client's error: a 400 naming it. The guard's own
walks over a request (the cap's count, pins) recurse, so nesting is bounded well below
Python's stack: ``MAX_DEPTH`` is far deeper than any chat request.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 200


class BadRequestJson(ValueError):
    """A body that parses, but not as a request the guard may forward; one line."""


def _constant(name: str) -> float:
    raise BadRequestJson(f"{name} is not a JSON number: send a finite number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadRequestJson(f"{text[:40]} is out of a double's range: send a finite number")
    return value


def _depth(value: object) -> int:
    """The nesting depth of a parsed value, walked without recursion."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            items: Any = item.values()
        elif isinstance(item, list):
            items = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, depth + 1) for child in items)
    return deepest


def request_object(raw: bytes) -> dict[str, Any] | None:
    """The body as a JSON object; None when it is not one (passed on for the engine to refuse).

    Raises :class:`BadRequestJson` for a body the guard must not re-send: non-finite
    numbers, or nesting deeper than ``MAX_DEPTH``.
    """
    try:
        value = json.loads(raw, parse_constant=_constant, parse_float=_finite)
    except RecursionError:
        raise BadRequestJson(f"the JSON body is nested deeper than {MAX_DEPTH} levels") from None
    except BadRequestJson:
        raise
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    if _depth(value) > MAX_DEPTH:
        raise BadRequestJson(f"the JSON body is nested deeper than {MAX_DEPTH} levels")
    return value
