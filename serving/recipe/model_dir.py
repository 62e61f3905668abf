"""What the checkpoint on this host says about itself: its model, layer count and size.

The partition must sum to the model's decoder layers (40, 43, 45 or 78 on the rigs the
seeds describe, never one number for all), and the weights must fit on the cards: both
are read from the model directory when it is readable here, and so is which model it is
(``model_type``, ``architectures``: the strongest evidence of the rule set that applies). A container recipe names the
model by its path inside the container, so that path is mapped back through ``mounts``.
Reading is cheap (one small JSON file and a ``stat`` per weight file): the daemon does it
before every start.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

# Hugging Face names for the decoder layer count (``num_layers``: ChatGLM/GLM configs).
LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
CONFIG_NAME = "config.json"


@dataclass(frozen=True)
class ModelFacts:
    """What one model directory says; ``None`` where it says nothing readable.

    ``layers_source`` names where the count came from (``config.json num_hidden_layers``);
    ``weight_files`` is how many files ``weight_bytes`` sums. ``model_type`` and
    ``architectures`` are config.json's (``text_config``'s when the top level has none).
    """

    path: Path
    layers: int | None = None
    layers_source: str | None = None
    weight_bytes: int | None = None
    weight_files: int = 0
    model_type: str | None = None
    architectures: tuple[str, ...] = ()


def host_model_path(model: str, mounts: tuple[str, ...], in_container: bool) -> Path | None:
    """Where ``model`` lives on this host: the path itself, or mapped back through a mount.

    A hub id (``org/name``) or a container path no mount covers has no host path.
    """
    if not model.startswith(("/", "~", "./", "../")):
        return None
    if not in_container:
        return Path(model).expanduser()
    target = PurePosixPath(model)
    best: tuple[int, Path] | None = None
    for mount in mounts:
        source, _, rest = mount.partition(":")
        mounted = PurePosixPath(rest.split(":")[0])
        if not source.startswith(("/", "~", ".")):
            continue  # a named volume: not a host path
        if target == mounted or mounted in target.parents:
            depth = len(mounted.parts)
            if best is None or depth > best[0]:
                relative = target.relative_to(mounted)
                best = (depth, Path(source).expanduser() / relative)
    return None if best is None else best[1]


def _layers(config: Mapping[str, Any]) -> tuple[int, str] | None:
    for table, prefix in ((config, ""), (config.get("text_config"), "text_config.")):
        if not isinstance(table, Mapping):
            continue
        for key in LAYER_KEYS:
            value = table.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value, f"{CONFIG_NAME} {prefix}{key}"
    return None


def _identity(config: Mapping[str, Any]) -> tuple[str | None, tuple[str, ...]]:
    """``model_type`` and ``architectures``, from the top level, else ``text_config``."""
    model_type: str | None = None
    architectures: tuple[str, ...] = ()
    for table in (config, config.get("text_config")):
        if not isinstance(table, Mapping):
            continue
        found = table.get("model_type")
        if model_type is None and isinstance(found, str) and found.strip():
            model_type = found.strip()
        names = table.get("architectures")
        if not architectures and isinstance(names, list):
            architectures = tuple(name for name in names if isinstance(name, str) and name)
    return model_type, architectures


def _weights(directory: Path) -> tuple[int, int] | None:
    total, count = 0, 0
    try:
        entries = list(directory.iterdir())
    except OSError:
        return None
    for entry in entries:
        if not entry.name.endswith(WEIGHT_SUFFIXES):
            continue
        try:
            size = entry.stat().st_size
        except OSError:
            continue
        total, count = total + size, count + 1
    return (total, count) if count else None


def read_model_dir(path: Path) -> ModelFacts | None:
    """The facts of the model directory at ``path``; None when it is not a readable dir."""
    if not path.is_dir():
        return None
    layers: tuple[int, str] | None = None
    model_type: str | None = None
    architectures: tuple[str, ...] = ()
    try:
        config = json.loads((path / CONFIG_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = None
    if isinstance(config, Mapping):
        layers = _layers(config)
        model_type, architectures = _identity(config)
    weights = _weights(path)
    return ModelFacts(
        path=path,
        layers=None if layers is None else layers[0],
        layers_source=None if layers is None else layers[1],
        weight_bytes=None if weights is None else weights[0],
        weight_files=0 if weights is None else weights[1],
        model_type=model_type,
        architectures=architectures,
    )
