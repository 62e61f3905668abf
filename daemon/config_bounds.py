"""Bounds every config value must keep before the settings models see it (issue 22).

Pydantic's lax mode reads ``true`` as 1 and ``"yes"`` as True, and a ``gt=0`` duration
takes ``inf`` or ``1e308``: ``[alerts] repeat_interval_s = inf`` once killed the alert
thread at start (an Xid 79 then raised no alert, silently) and ``[store]
raw_retention_h = inf`` tracebacked every rollup. So, walking the raw table along the
models' fields: every duration (a key ending in ``_s``, ``_h`` or ``_days``) must be a
finite number no larger than its unit's maximum, a number field takes no boolean and no
string (``interval_s = "2"`` is a typo pydantic would read as 2) and a boolean field
nothing but a boolean, inside lists too (``[canary] depths = ["16000"]``, issue 36). The
first problem is one line naming the key.
"""

from __future__ import annotations

import math
import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

# The longest duration each unit may say (a year of seconds, ten years of hours or days).
MAX_BY_SUFFIX = {"_s": 366 * 86400.0, "_h": 10 * 8784.0, "_days": 10 * 366.0}


def _unwrapped(annotation: Any) -> tuple[Any, ...]:
    """The plain types an annotation allows (``Annotated`` and ``| None`` peeled off)."""
    if get_origin(annotation) is Annotated:
        return _unwrapped(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        found: list[Any] = []
        for arg in get_args(annotation):
            if arg is not type(None):
                found.extend(_unwrapped(arg))
        return tuple(found)
    return (annotation,)


def _models(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """The settings model a field holds and how: ``one``, ``list`` or ``dict`` of them."""
    for plain in _unwrapped(annotation):
        if isinstance(plain, type) and issubclass(plain, BaseModel):
            return plain, "one"
        origin, args = get_origin(plain), get_args(plain)
        inner = args[-1] if origin in (list, dict) and args else None
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            return inner, "list" if origin is list else "dict"
    return None, ""


def _list_item(annotation: Any) -> Any:
    """The item type of a list (or set, or ``tuple[X, ...]``) field, else None."""
    for plain in _unwrapped(annotation):
        if get_origin(plain) in (list, tuple, set, frozenset) and get_args(plain):
            return get_args(plain)[0]
    return None


def _duration_problem(key: str, value: Any) -> str | None:
    for suffix, most in MAX_BY_SUFFIX.items():
        if not key.endswith(suffix) or isinstance(value, bool):
            continue
        # The lower bound is each model's own (``gt=0``, ``ge=0``): its message says it.
        if isinstance(value, int | float) and not (math.isfinite(value) and value <= most):
            return f"expected a finite duration of at most {most:.0f} (got {value!r})"
    return None


def _type_problem(annotation: Any, value: Any) -> str | None:
    plain = set(_unwrapped(annotation))
    if isinstance(value, bool) and plain & {int, float} and bool not in plain:
        return f"expected a number, not the boolean {str(value).lower()}"
    if isinstance(value, str) and plain & {int, float} and str not in plain:
        return f"expected a number, not the string {value!r} (write it without quotes)"
    if plain == {bool} and not isinstance(value, bool):
        return f"expected true or false (got {value!r})"
    return None


def first_problem(table: Any, model: type[BaseModel]) -> tuple[tuple[str, ...], str] | None:
    """``(key path, what is wrong)`` for the first value out of bounds in ``table``, or None.

    Keys the model does not know are left to its own validation (which names them).
    """
    if not isinstance(table, dict):
        return None
    for key, value in table.items():
        field = model.model_fields.get(str(key))
        if field is None:
            continue
        problem = _duration_problem(str(key), value) or _type_problem(field.annotation, value)
        if problem is not None:
            return (str(key),), problem
        item_type = _list_item(field.annotation) if isinstance(value, list) else None
        for index, item in enumerate(value if item_type is not None else ()):
            problem = _type_problem(item_type, item)
            if problem is not None:
                return (f"{key}[{index}]",), problem
        inner, how = _models(field.annotation)
        if inner is None:
            continue
        items: list[tuple[str, Any]] = [(str(key), value)]
        if how == "list" and isinstance(value, list):
            items = [(f"{key}[{i}]", item) for i, item in enumerate(value)]
        elif how == "dict" and isinstance(value, dict):
            items = [(f"{key}.{name}", item) for name, item in value.items()]
        for where, item in items:
            found = first_problem(item, inner)
            if found is not None:
                return (where, *found[0]), found[1]
    return None
