"""Which ``GpuSnapshot`` fields a scenario or the fault API may set, and their checking.

The table is derived from ``hwcheck.model.GpuSnapshot`` itself, so a field the model
gains is settable here with no second list to keep in step. Scenario files and the
``/api/v1/sim/card`` endpoint share this one checker, so both reject the same mistakes
with the same one-line wording.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import types
import typing
from dataclasses import dataclass

from hwcheck.model import GpuSnapshot, normalize_pci_bus_id

# A value a simulated card field can hold (TOML and JSON both map onto these).
CardValue = int | float | str | bool | None

# TOML has no null: this string (any case) stands for "the card does not report it",
# the same words nvidia-smi prints.
NOT_AVAILABLE = "n/a"

# Set by position, never by name: a card's index is where it sits in the scenario.
_NOT_SETTABLE = frozenset({"index"})


class FieldError(ValueError):
    """A bad field name or value; ``path`` is the key, ``problem`` what is wrong with it."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass(frozen=True, slots=True)
class FieldType:
    """The Python type a field holds and whether ``None`` (not available) is allowed."""

    base: type
    nullable: bool
    choices: tuple[str, ...] = ()  # a string field that takes one of these words (an enum)

    def describe(self) -> str:
        """What a valid value looks like, for error messages."""
        words = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
        text = f"one of {', '.join(self.choices)}" if self.choices else words[self.base]
        return f'{text} or "{NOT_AVAILABLE}"' if self.nullable else text


def _field_types() -> dict[str, FieldType]:
    """Map every settable ``GpuSnapshot`` field to its ``FieldType``."""
    hints = typing.get_type_hints(GpuSnapshot)
    table: dict[str, FieldType] = {}
    for field in dataclasses.fields(GpuSnapshot):
        if field.name in _NOT_SETTABLE:
            continue
        hint = hints[field.name]
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        nullable = type(None) in args
        bases = [arg for arg in args if arg is not type(None)]
        if len(bases) == 1 and bases[0] in (int, float, str, bool):
            table[field.name] = FieldType(base=bases[0], nullable=nullable)
        elif len(bases) == 1 and isinstance(bases[0], type) and issubclass(bases[0], enum.StrEnum):
            words = tuple(member.value for member in bases[0])
            table[field.name] = FieldType(base=str, nullable=nullable, choices=words)
    return table


CARD_FIELD_TYPES: typing.Final[types.MappingProxyType[str, FieldType]] = types.MappingProxyType(
    _field_types()
)


def describe_value(value: object) -> str:
    """A short TOML/JSON-like rendering of ``value`` for error messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    return type(value).__name__


def expect_int(path: str, value: object) -> int:
    """``value`` as an integer (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(path, f"expected an integer, got {describe_value(value)}")
    return value


# A scenario's durations are at most a year: ``nvml_delay_s = 1e308`` once reached
# ``time.sleep`` and ended the poll with an OverflowError traceback (issue 22).
MAX_SCENARIO_SECONDS = 365 * 86_400.0


def expect_number(path: str, value: object) -> float:
    """``value`` as a finite float (integers are accepted; bools, ``inf`` and ``nan`` not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldError(path, f"expected a number, got {describe_value(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise FieldError(path, f"expected a finite number, got {describe_value(value)}")
    return number


def expect_seconds(path: str, value: object) -> float:
    """``value`` as seconds: a number from 0 to a year (``MAX_SCENARIO_SECONDS``)."""
    seconds = expect_number(path, value)
    if not 0 <= seconds <= MAX_SCENARIO_SECONDS:
        raise FieldError(
            path, f"must be 0 to {MAX_SCENARIO_SECONDS:.0f} seconds (a year), got {seconds:g}"
        )
    return seconds


def expect_str(path: str, value: object) -> str:
    """``value`` as a string."""
    if not isinstance(value, str):
        raise FieldError(path, f"expected a string, got {describe_value(value)}")
    return value


def expect_bool(path: str, value: object) -> bool:
    """``value`` as a bool."""
    if not isinstance(value, bool):
        raise FieldError(path, f"expected true or false, got {describe_value(value)}")
    return value


def check_card_field(path: str, name: str, value: object) -> CardValue:
    """Check one card field and return it in the model's type.

    ``path`` is the key path up to (not including) ``name``, e.g. ``cards[2]``; it is
    empty for the fault API. ``"n/a"`` becomes ``None`` where the model allows it; PCI
    addresses are normalised so scenario files may use NVML's upper-case form.
    """
    key = f"{path}.{name}" if path else name
    field_type = CARD_FIELD_TYPES.get(name)
    if field_type is None:
        known = ", ".join(sorted(CARD_FIELD_TYPES))
        raise FieldError(key, f"unknown card field (known: {known})")
    if value is None or (isinstance(value, str) and value.lower() == NOT_AVAILABLE):
        if field_type.nullable:
            return None
        raise FieldError(key, f"expected {field_type.describe()}, got {describe_value(value)}")
    base = field_type.base
    ok = (
        (base is bool and isinstance(value, bool))
        or (base is int and isinstance(value, int) and not isinstance(value, bool))
        or (base is float and isinstance(value, int | float) and not isinstance(value, bool))
        or (base is str and isinstance(value, str))
    )
    if ok and field_type.choices:
        ok = value in field_type.choices
    if not ok:
        raise FieldError(key, f"expected {field_type.describe()}, got {describe_value(value)}")
    if base is float:
        number = float(typing.cast(float, value))
        if not math.isfinite(number):
            raise FieldError(key, f"expected a finite number, got {describe_value(value)}")
        return number
    if name == "pci_bus_id":
        try:
            return normalize_pci_bus_id(typing.cast(str, value))
        except ValueError:
            raise FieldError(key, f"not a PCI address: {describe_value(value)}") from None
    return typing.cast(CardValue, value)


def check_card_fields(path: str, fields: typing.Mapping[str, object]) -> dict[str, CardValue]:
    """Check every entry of ``fields`` (see ``check_card_field``)."""
    return {name: check_card_field(path, name, value) for name, value in fields.items()}


def expect_table(path: str, value: object) -> dict[str, object]:
    """A TOML table (a dict) or a ``FieldError``."""
    if not isinstance(value, dict):
        raise FieldError(path, f"expected a table, got {describe_value(value)}")
    return value


def expect_list(path: str, value: object) -> list[object]:
    """A TOML array (a list) or a ``FieldError``."""
    if not isinstance(value, list):
        raise FieldError(path, f"expected a list, got {describe_value(value)}")
    return value


def reject_unknown(path: str, table: typing.Mapping[str, object], known: frozenset[str]) -> None:
    """A key outside ``known`` is a mistake (a typo must not be silently ignored)."""
    for key in table:
        if key not in known:
            where = f"{path}.{key}" if path else key
            raise FieldError(where, f"unknown key (known: {', '.join(sorted(known))})")


def card_index(path: str, value: object, count: int) -> int:
    """A card position that exists in a scenario of ``count`` cards."""
    index = expect_int(path, value)
    if not 0 <= index < count:
        raise FieldError(
            path, f"card {index} does not exist (the scenario has {count} cards: 0 to {count - 1})"
        )
    return index
