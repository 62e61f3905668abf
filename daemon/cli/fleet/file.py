"""The fleet file (``~/.config/cmpfleet/rigs.toml``): ``[rigs.NAME]`` with ``url``, ``token_file``.

Every mistake is reported as one line naming the file and the key (``rigs.NAME.url``), so a
person fixing a fleet of twenty rigs sees at once which entry is wrong. A relative
``token_file`` is read from the fleet file's own directory, not from wherever fleetctl runs.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from daemon.cli.transport import url_problem
from hwcheck.atomic import NotARegularFile
from hwcheck.regular_file import read_regular

RIG_KEYS = frozenset({"url", "token_file"})


class FleetFileError(Exception):
    """The fleet file is missing, malformed, or has no such rig."""


@dataclass(frozen=True)
class Rig:
    """One rig of the fleet: its name in the file, fleetd's URL and its token file."""

    name: str
    url: str
    token_file: Path | None


def default_fleet_file() -> Path:
    """``$XDG_CONFIG_HOME/cmpfleet/rigs.toml`` (``~/.config`` by default)."""
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "cmpfleet" / "rigs.toml"


def load_fleet(path: Path | None = None) -> list[Rig]:
    """Every rig of the fleet file, in the file's order."""
    path = path or default_fleet_file()
    try:
        table = tomllib.loads(read_regular(path).decode("utf-8"))
    except FileNotFoundError:
        raise FleetFileError(f"{path}: no such fleet file") from None
    except NotARegularFile as exc:
        raise FleetFileError(f"{path}: is {exc.what}, not a fleet file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FleetFileError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise FleetFileError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(table) - {"rigs"})
    if unknown:
        raise FleetFileError(f"{path}: {unknown[0]}: unknown key (expected [rigs.NAME] tables)")
    rigs = table.get("rigs")
    if not isinstance(rigs, dict) or not rigs:
        raise FleetFileError(f"{path}: rigs: expected at least one [rigs.NAME] table")
    return [_rig(path, name, entry) for name, entry in rigs.items()]


def _rig(path: Path, name: str, entry: object) -> Rig:
    """One ``[rigs.NAME]`` table, checked key by key."""
    where = f"{path}: rigs.{name}"
    if not isinstance(entry, dict):
        raise FleetFileError(f"{where}: expected a table with url and optional token_file")
    unknown = sorted(set(entry) - RIG_KEYS)
    if unknown:
        raise FleetFileError(f"{where}.{unknown[0]}: unknown key (expected url, token_file)")
    url = entry.get("url")
    if not isinstance(url, str):
        raise FleetFileError(f"{where}.url: expected a URL string such as http://rig1:8170")
    _check_url(f"{where}.url", url)
    token = entry.get("token_file")
    if token is not None and (not isinstance(token, str) or not token.strip()):
        raise FleetFileError(f"{where}.token_file: expected a path string")
    token_file = None
    if token:
        token_file = Path(token).expanduser()
        if not token_file.is_absolute():
            token_file = path.parent / token_file
    return Rig(name=name, url=url.rstrip("/"), token_file=token_file)


def _check_url(where: str, url: str) -> None:
    """An ``http(s)://host[:port]`` URL, or a one-line error saying what is off."""
    problem = url_problem(url)
    if problem is not None:
        raise FleetFileError(f"{where}: {problem}")


def resolve_rig(name: str, path: Path | None = None) -> Rig:
    """One rig of the fleet file, by name."""
    path = path or default_fleet_file()
    rigs = {rig.name: rig for rig in load_fleet(path)}
    if name not in rigs:
        known = ", ".join(sorted(rigs)) or "none"
        close = difflib.get_close_matches(name, list(rigs), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise FleetFileError(f"{path}: no rig {name!r} ({hint}known: {known})")
    return rigs[name]
