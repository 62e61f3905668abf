"""Built-in launch recipes, shipped as package data (``<name>.toml`` beside this file).

A recipe starts from one with ``preset = "NAME"``. The DSV4 presets reproduce the seeds'
reference launch flag for flag; ``sim-engine`` runs the simulated engine with the same
flags so that the demo daemon exercises the real recipe path and lints clean.
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from typing import Any

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class PresetNotFound(LookupError):
    """No built-in preset has that name."""


def preset_names() -> list[str]:
    """Names of the built-in presets, sorted."""
    folder = resources.files(__name__)
    return sorted(
        entry.name.removesuffix(".toml")
        for entry in folder.iterdir()
        if entry.name.endswith(".toml") and entry.is_file()
    )


def read_preset(name: str) -> dict[str, Any]:
    """The raw TOML table of preset ``name``.

    Names are plain ``[a-z0-9-]`` words, never paths, so a recipe cannot use ``preset``
    to read an arbitrary file.
    """
    if not _NAME_RE.match(name):
        raise PresetNotFound(f"no preset named {name!r}")
    entry = resources.files(__name__).joinpath(f"{name}.toml")
    if not entry.is_file():
        raise PresetNotFound(f"no preset named {name!r}")
    return tomllib.loads(entry.read_text(encoding="utf-8"))
