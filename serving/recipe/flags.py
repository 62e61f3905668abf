"""Engine command-line flags as groups: ``--flag value`` and ``--flag=value`` alike.

Recipes carry free-form ``extra_args``; the builder needs to place the typed flags among
them and the linter needs to find a flag whatever way it was written, so both go through
this one splitter instead of scanning token lists ad hoc.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_NEGATIVE_NUMBER_RE = re.compile(r"^-\d")


@dataclass(frozen=True)
class FlagGroup:
    """One flag with the values that follow it, and the tokens it was written as.

    ``name`` is normalised (``--max_model_len`` -> ``--max-model-len``, vLLM's parser
    accepts both); ``tokens`` are the original argv tokens, kept verbatim for the launch.
    A group whose ``name`` is "" holds positional tokens before any flag.
    """

    name: str
    values: tuple[str, ...]
    tokens: tuple[str, ...]

    @property
    def value(self) -> str:
        """The values joined by spaces ("" for a switch such as ``--trust-remote-code``)."""
        return " ".join(self.values)

    @property
    def shown(self) -> str:
        """The value for messages: a bare switch reads ``true``, as argparse stores it."""
        return self.value if self.values else "true"


def normalize_flag(flag: str) -> str:
    """``--max_model_len`` -> ``--max-model-len``; short flags unchanged."""
    if flag.startswith("--"):
        return "--" + flag[2:].replace("_", "-")
    return flag


def _is_flag(word: str) -> bool:
    return word.startswith("-") and word != "-" and not _NEGATIVE_NUMBER_RE.match(word)


def split_flags(tokens: Sequence[str]) -> list[FlagGroup]:
    """Group ``tokens`` into flags; a token that is not a flag belongs to the flag before it."""
    groups: list[FlagGroup] = []
    name = ""
    values: list[str] = []
    written: list[str] = []

    def close() -> None:
        if name or written:
            groups.append(FlagGroup(name, tuple(values), tuple(written)))

    for token in tokens:
        if _is_flag(token):
            close()
            flag, equals, inline = token.partition("=")
            name = normalize_flag(flag)
            values = [inline] if equals else []
            written = [token]
        else:
            values.append(token)
            written.append(token)
    close()
    return groups


def find_flag(groups: Iterable[FlagGroup], *names: str) -> FlagGroup | None:
    """The last group named any of ``names`` (argparse keeps the last occurrence)."""
    found: FlagGroup | None = None
    wanted = {normalize_flag(name) for name in names}
    for group in groups:
        if group.name in wanted:
            found = group
    return found


def flag_key(name: str) -> str:
    """The setting a flag controls: ``--no-trust-remote-code`` and ``--trust-remote-code`` alike.

    vLLM's boolean options take a ``--no-`` form; merging and the linter treat both forms
    as one setting, so the negated form given in a recipe replaces the preset's switch.
    """
    normalized = normalize_flag(name)
    if normalized.startswith("--no-"):
        return "--" + normalized.removeprefix("--no-")
    return normalized


@dataclass(frozen=True)
class FlagOverride:
    """A preset's flag that a recipe's ``extra_args`` gave again (``recipe show`` lists them).

    ``dropped`` is true when the recipe turned the preset's switch off (``--no-X`` for the
    preset's ``--X``, or the other way round): the preset's setting is gone, not retuned.
    """

    flag: str
    preset_tokens: tuple[str, ...]
    recipe_tokens: tuple[str, ...]

    @property
    def dropped(self) -> bool:
        """True when the recipe negates the preset's switch instead of changing its value."""
        preset_names = {group.name for group in split_flags(self.preset_tokens)}
        recipe_names = {group.name for group in split_flags(self.recipe_tokens)}
        return not preset_names & recipe_names

    def to_dict(self) -> dict[str, object]:
        """JSON form for ``recipe show --json``."""
        return {
            "flag": self.flag,
            "preset": list(self.preset_tokens),
            "recipe": list(self.recipe_tokens),
            "dropped": self.dropped,
        }


def merge_flags(
    preset: Sequence[str], recipe: Sequence[str]
) -> tuple[list[str], list[FlagOverride]]:
    """The preset's ``extra_args`` with the recipe's added, and the preset flags overridden.

    A flag the recipe gives again replaces the preset's occurrence(s) in place (so the launch
    keeps the seeds' reference order); every other recipe flag is appended in its own order.
    """
    recipe_groups = split_flags(recipe)
    by_key: dict[str, list[FlagGroup]] = {}
    for group in recipe_groups:
        if group.name:
            by_key.setdefault(flag_key(group.name), []).append(group)
    merged: list[str] = []
    overridden: dict[str, FlagOverride] = {}
    for group in split_flags(preset):
        key = flag_key(group.name) if group.name else ""
        replacement = by_key.get(key)
        if replacement is None:
            merged.extend(group.tokens)
            continue
        earlier = overridden.get(key)
        if earlier is None:  # the first occurrence takes the recipe's flag(s)
            given = tuple(token for item in replacement for token in item.tokens)
            merged.extend(given)
            overridden[key] = FlagOverride(key, group.tokens, given)
        else:  # the preset repeated the flag: that occurrence is replaced too
            overridden[key] = FlagOverride(
                key, earlier.preset_tokens + group.tokens, earlier.recipe_tokens
            )
    for group in recipe_groups:
        if not group.name or flag_key(group.name) not in overridden:
            merged.extend(group.tokens)
    changed = [item for item in overridden.values() if item.preset_tokens != item.recipe_tokens]
    return merged, changed
