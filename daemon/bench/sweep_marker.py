"""The cap sweep's marker: the caps to put back, kept on disk while a sweep changes them.

A sweep sets every card to cap after cap. Ctrl-C and the sweep's end put the caps back at
once; a fleetd killed mid-sweep (``kill -9``, a crash, a power cut of the daemon alone)
cannot, so before the first change the caps in force are written here (0600, atomically),
and the next fleetd start puts them back and removes the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from hwcheck.atomic import atomic_write


@dataclass(frozen=True, slots=True)
class SweepMarker:
    """Each card's cap before the sweep (NVML index -> watts), and when it began."""

    caps_w: dict[int, float]
    started_at: str
    run_id: int | None = None

    def write(self, path: Path) -> None:
        """Keep it on disk (raises OSError: a sweep that cannot promise its restore refuses)."""
        document = {
            "caps_w": {str(card): cap for card, cap in self.caps_w.items()},
            "started_at": self.started_at,
            "run_id": self.run_id,
        }
        atomic_write(path, json.dumps(document, indent=2) + "\n")

    @classmethod
    def now(cls, caps_w: dict[int, float], run_id: int | None) -> SweepMarker:
        """A marker stamped now."""
        return cls(caps_w, datetime.now(UTC).isoformat(), run_id)


def read_marker(path: Path) -> SweepMarker | None:
    """The marker left on disk, or None (none, or unreadable: then it is removed)."""
    try:
        document = json.loads(path.read_text())
        caps = {int(card): float(cap) for card, cap in document["caps_w"].items()}
        run_id = document.get("run_id")
        return SweepMarker(caps, str(document.get("started_at", "")), run_id)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        path.unlink(missing_ok=True)
        return None


def clear_marker(path: Path) -> None:
    """The caps are back: forget them."""
    path.unlink(missing_ok=True)
