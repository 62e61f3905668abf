"""The fleet file (``~/.config/cmpfleet/rigs.toml``): ``[rigs.NAME]`` with ``url``, ``token_file``."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path


class FleetFileError(Exception):
    """The fleet file is missing, malformed, or has no such rig."""


def default_fleet_file() -> Path:
    """``$XDG_CONFIG_HOME/cmpfleet/rigs.toml`` (``~/.config`` by default)."""
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "cmpfleet" / "rigs.toml"


def load_rigs(path: Path | None = None) -> dict[str, tuple[str, Path | None]]:
    """Every rig: name -> (url, token file or None)."""
    path = path or default_fleet_file()
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FleetFileError(f"{path}: no such fleet file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FleetFileError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise FleetFileError(f"{path}: not valid TOML: {exc}") from None
    rigs = table.get("rigs")
    if not isinstance(rigs, dict):
        raise FleetFileError(f"{path}: expected [rigs.NAME] tables")
    out: dict[str, tuple[str, Path | None]] = {}
    for name, entry in rigs.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
            raise FleetFileError(f"{path}: rigs.{name}.url: expected a URL string")
        token = entry.get("token_file")
        if token is not None and not isinstance(token, str):
            raise FleetFileError(f"{path}: rigs.{name}.token_file: expected a path string")
        out[name] = (entry["url"], Path(token).expanduser() if token else None)
    return out


def resolve_rig(name: str, path: Path | None = None) -> tuple[str, Path | None]:
    """One rig's URL and token file."""
    rigs = load_rigs(path)
    if name not in rigs:
        known = ", ".join(sorted(rigs)) or "none"
        raise FleetFileError(f"no rig {name!r} in the fleet file (known: {known})")
    return rigs[name]
