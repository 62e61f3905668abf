"""A process recipe that runs a launcher script: what lint can read of it without running it.

The seeds' launches are scripts (``launch/run-pp-dspark.sh``): their ``export``s are the
engine's environment, so lint without them raised false ``row-chunk-unset`` and
``multiproc-method`` errors, and the ``rmmod nvidia_uvm`` / ``modprobe -r`` they run to
"recover" wedged cards went unseen (on a four-card PP job that turned one Xid 31 into Xid
154 on every card, and only a reboot recovered: tim-odonnell, 2026-09-29).

The script is read, bounded (``hwcheck.regular_file``: a regular file only, at most
``MAX_SCRIPT_BYTES``), and never run. Only ``export NAME=value`` lines count: ``$VAR``,
``${VAR}`` and ``${VAR:-default}`` resolve against the exports before them (else the
default; the launch's own ``[env]`` is not known to the script here), and a value still
holding a ``$`` (a command substitution) is kept as written, which the rules treat as
unknown rather than wrong; a shell's conditionals are
not followed, so an export inside an ``if`` counts as if it always ran: lint errs towards
believing the script sets what it names.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from hwcheck.regular_file import read_regular

MAX_SCRIPT_BYTES = 256 * 1024
# Interpreters a recipe runs a script with: ``bash launch/run.sh``.
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})
SCRIPT_SUFFIXES = (".sh", ".bash")

_EXPORT_RE = re.compile(r"^\s*export\s+(.+)$")
# Lines that only print: "never rmmod nvidia_uvm" in a warning is no reload.
_PRINTS_RE = re.compile(r"^\s*(?:echo|printf|log|warn|die)\b")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RELOAD_RE = re.compile(
    r"(?:^|[;&|(\s])(?:sudo\s+)?(?:\S*/)?"
    r"(rmmod(?:\s+-\S+)*\s+\S+|modprobe\s+(?:-[A-Za-z]*r[A-Za-z]*|--remove)\b(?:\s+[\w-]+)?)"
)
# ``$NAME``, ``${NAME}``, ``${NAME:-default}`` / ``${NAME-default}``.
_EXPANSION_RE = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)


@dataclass(frozen=True)
class ScriptFacts:
    """What a launcher script sets and runs, as far as reading it shows."""

    path: str
    exports: dict[str, str] = field(default_factory=dict)
    # ``(line number, the command)`` of each kernel module unload or reload.
    module_reloads: tuple[tuple[int, str], ...] = ()
    unreadable: str | None = None


def script_path(command: tuple[str, ...]) -> str | None:
    """The launcher script a process command runs, if it runs one.

    ``bash launch/run.sh ...``, ``./launch/run.sh``, ``/opt/dsv4/run-pp-dspark.sh``: the
    first argument ending ``.sh``/``.bash`` before any flag, or the argument after a shell.
    """
    if not command:
        return None
    first = Path(command[0]).name
    if first in SHELLS:
        rest = [token for token in command[1:] if not token.startswith("-")]
        return rest[0] if rest else None
    if command[0].endswith(SCRIPT_SUFFIXES):
        return command[0]
    return None


def _expand(value: str, known: dict[str, str]) -> str:
    """``value`` with the expansions it names resolved against ``known`` (else defaults)."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        if name in known:
            return known[name]
        default = match.group(2)
        return default if default is not None else match.group(0)

    return _EXPANSION_RE.sub(one, value)


def _exports(line: str, known: dict[str, str]) -> dict[str, str]:
    match = _EXPORT_RE.match(line)
    if match is None:
        return {}
    try:
        words = shlex.split(match.group(1), comments=True)
    except ValueError:
        return {}
    found: dict[str, str] = {}
    for word in words:
        name, sep, value = word.partition("=")
        if sep and _NAME_RE.match(name):
            found[name] = _expand(value, {**known, **found})
    return found


def read_script(path: str, base: Path | None = None) -> ScriptFacts:
    """The facts of the script at ``path`` (relative to ``base``), never running it."""
    full = Path(path).expanduser()
    if not full.is_absolute() and base is not None:
        full = base / full
    try:
        text = read_regular(full, MAX_SCRIPT_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        return ScriptFacts(path, unreadable=str(exc.strerror or exc))
    exports: dict[str, str] = {}
    reloads: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#!") else ""
        exports.update(_exports(code, exports))
        match = None if _PRINTS_RE.match(code) else _RELOAD_RE.search(code)
        if match is not None:
            reloads.append((number, match.group(1).strip()))
    return ScriptFacts(path, exports, tuple(reloads))
