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
