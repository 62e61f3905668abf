"""Documents as today's daemon serves them, recorded from a simulated fleetd.

``documents.json`` was captured over HTTP from ``fleetd --simulate healthy`` before the
routes had response models (an Xid injected, a card relocked, caps applied, the engine
started and stopped), then trimmed, and given a few extras a later capability may add
(``canaries``, ``rig.kernel_log``, an event's ``details``, an int ``power_limit_w``, a
lost card of nulls): the API must serve all of it back unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DOCUMENTS: dict[str, Any] = json.loads(
    (Path(__file__).with_name("documents.json")).read_text(encoding="utf-8")
)


# What was added to the recording by hand (a real simulated daemon need not have it).
ADDED_PATHS = frozenset(
    {
        ".status.canaries",
        ".status.rig.kernel_log",
        ".status.serving.metrics",
        ".status.serving.last_refusal",
        ".events[].details",
    }
)


def key_paths(document: Any, path: str = "") -> set[str]:
    """Every key path of ``document`` (list items merged as ``[]``), values ignored."""
    paths: set[str] = set()
    if isinstance(document, dict):
        for key, value in document.items():
            paths.add(f"{path}.{key}")
            paths |= key_paths(value, f"{path}.{key}")
    elif isinstance(document, list):
        for value in document:
            paths |= key_paths(value, f"{path}[]")
    return paths


def recorded_paths(name: str) -> set[str]:
    """The key paths of a recorded document that any daemon serving it today has."""
    return {
        path
        for path in key_paths(DOCUMENTS[name], f".{name}")
        if not any(
            path == added or path[len(added) : len(added) + 1] in (".", "[")
            for added in ADDED_PATHS
            if path.startswith(added)
        )
    }
