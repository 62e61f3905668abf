"""Write keys into a TOML config and keep everything else: comments, order, spacing.

``fleetctl init`` records a baseline into the rig's config, which is usually the fully
commented example ``fleetd install`` put there (or a config a person wrote). Rewriting the
file from data would drop every comment, so the edit is a round trip through tomlkit (a
TOML library that keeps comments and layout): a key that is there gets its new value in
place (an unchanged value is not touched at all, its formatting included); a new key is
written after its commented example (``# card_count = 4``) when the table has one, else
after the table's last key, never among the comments that introduce the next table. What
to write is data, ``TableUpdate``s, so any baseline (the cards', the host's) adds its own
tables to what init records.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import tomlkit
from tomlkit.items import InlineTable, Table

_HEADER = re.compile(r"^\s*\[\[?(?P<key>[^\[\]]+)\]\]?\s*(?:#.*)?$")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


class ConfigEditError(Exception):
    """The config cannot take the edit (not TOML, or a key of another type in the way)."""


@dataclass(frozen=True)
class TableUpdate:
    """Keys to write into one table of the config.

    ``path`` names the table (``("rig",)``, ``("rig", "pcie_baseline")``); ``values`` its
    keys (a mapping value is written as an inline table); ``replace`` drops the table's
    other keys (a per-card table: a card gone from the rig leaves it); ``comments`` are
    trailing comments for keys (``# card 0 GPU-...: 65536 MiB``).
    """

    path: tuple[str, ...]
    values: Mapping[str, Any]
    replace: bool = False
    comments: Mapping[str, str] = field(default_factory=dict)


def _key_text(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else tomlkit.dumps({key: 0}).split(" = ")[0]


def _item(value: Any, comment: str | None) -> Any:
    if isinstance(value, Mapping):
        table = tomlkit.inline_table()
        table.update(dict(value))
        item: Any = table
    else:
        item = tomlkit.item(value)
    if comment:
        item.comment(comment)
    return item


def _line(key: str, value: Any, comment: str | None) -> str:
    """``key = value  # comment`` as tomlkit renders it (strings escaped, floats exact)."""
    document = tomlkit.document()
    document.add(key, _item(value, None))
    text = document.as_string().rstrip("\n")
    text = re.sub(r"= \{(?=\S)(.*)(?<=\S)\}$", r"= { \1 }", text)  # the example's style
    return f"{text}  # {comment}" if comment else text


def _table(document: tomlkit.TOMLDocument, path: tuple[str, ...]) -> Table | None:
    """The table at ``path`` when the document has it as a table."""
    node: Any = document
    for part in path:
        if part not in node:
            return None
        node = node[part]
        if not isinstance(node, Table | tomlkit.TOMLDocument):
            if isinstance(node, InlineTable):
                raise ConfigEditError(
                    f"{'.'.join(path)} is an inline table here: write it as [{'.'.join(path)}]"
                )
            raise ConfigEditError(f"{'.'.join(path)} is a value here, not a table")
    return node if isinstance(node, Table) else None


def _header_path(line: str) -> tuple[str, ...] | None:
    """The table path a ``[a.b]`` / ``[[a.b]]`` header line opens, else None."""
    match = _HEADER.match(line)
    if match is None:
        return None
    try:
        data: Any = tomllib.loads(f"[{match.group('key')}]")
    except tomllib.TOMLDecodeError:
        return None
    path: list[str] = []
    while isinstance(data, dict) and len(data) == 1:
        key, data = next(iter(data.items()))
        path.append(key)
    return tuple(path)


def _section(lines: list[str], path: tuple[str, ...]) -> tuple[int, int] | None:
    """``[start, end)`` of the lines under the header of ``path`` (the root: before any)."""
    start = 0 if not path else None
    for index, line in enumerate(lines):
        opened = _header_path(line)
        if opened is None:
            continue
        if start is not None:
            return start, index
        if opened == path and not line.lstrip().startswith("[["):
            start = index + 1
    return None if start is None else (start, len(lines))


def _insert_at(lines: list[str], start: int, end: int, key: str) -> int:
    """Where a new ``key`` goes: after its commented example, else after the last key."""
    example = re.compile(rf"^\s*#\s*{re.escape(_key_text(key))}\s*=")
    for index in range(start, end):
        if example.match(lines[index]):
            return index + 1
    last = None
    for index in range(start, end):
        stripped = lines[index].strip()
        if stripped and not stripped.startswith("#"):
            last = index
    if last is not None:
        return last + 1
    # Only comments: keep those right under the header (they describe the table).
    index = start
    while index < end and lines[index].strip().startswith("#"):
        index += 1
    return index


def apply_updates(text: str, updates: Sequence[TableUpdate]) -> str:
    """``text`` with ``updates`` written in; every other line kept as it was."""
    try:
        document = tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:
        raise ConfigEditError(f"not valid TOML: {exc}") from None
    new_keys: list[tuple[TableUpdate, str]] = []
    for update in updates:
        table = _table(document, update.path)
        if table is None:
            new_keys.extend((update, key) for key in update.values)
            continue
        if update.replace:
            for stale in [key for key in table if key not in update.values]:
                del table[stale]
        for key, value in update.values.items():
            current = table.get(key)
            if current is None:
                new_keys.append((update, key))
            elif _plain(current) != _plain(value):
                kept = current.trivia.comment.lstrip("# ").rstrip() if current.trivia else ""
                table[key] = _item(value, update.comments.get(key) or kept or None)
    lines = document.as_string().splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    for update, key in new_keys:
        line = _line(key, update.values[key], update.comments.get(key)) + "\n"
        section = _section(lines, update.path)
        if section is None:  # a table the file does not have yet: at the end
            header = "[" + ".".join(_key_text(part) for part in update.path) + "]\n"
            lines += ["\n", header] if lines else [header]
            section = (len(lines), len(lines))
        lines.insert(_insert_at(lines, *section, key), line)
    edited = "".join(lines)
    _check(edited, updates)
    return edited


def _plain(value: Any) -> Any:
    """A value as plain data (tomlkit items unwrapped) for comparing."""
    unwrap = getattr(value, "unwrap", None)
    return _plain(unwrap()) if callable(unwrap) else value


def _check(text: str, updates: Sequence[TableUpdate]) -> None:
    """The edit reads back as TOML holding every update (else it is refused, not written)."""
    try:
        data: Any = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigEditError(f"the edit would not be valid TOML ({exc})") from None
    for update in updates:
        node = data
        for part in update.path:
            node = node.get(part, {}) if isinstance(node, dict) else {}
        for key, value in update.values.items():
            if not isinstance(node, dict) or _plain(node.get(key)) != _plain(
                dict(value) if isinstance(value, Mapping) else value
            ):
                raise ConfigEditError(f"could not write {'.'.join((*update.path, key))}")
