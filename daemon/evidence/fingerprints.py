"""The last good boot of each recipe: kept in one file beside the bundles (0600).

"Good" is a ready whose fingerprint warned of nothing: a boot that came up with a smaller
pool is shown and warned about, but never becomes the yardstick the next boot is held to.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from hwcheck.atomic import atomic_write
from serving.evidence.kvpool import BootFingerprint

FINGERPRINTS_FILE = "fingerprints.json"
LOG = logging.getLogger("fleetd.evidence")


class FingerprintBook:
    """Per recipe hash: the last good ready; and the newest ready of any recipe."""

    def __init__(self, directory: Path) -> None:
        self._path = directory / FINGERPRINTS_FILE
        self.latest: BootFingerprint | None = None
        self._good: dict[str, dict[str, Any]] = {}
        try:
            doc = json.loads(self._path.read_text())
        except (OSError, ValueError):
            doc = {}
        self._good = dict(doc.get("good") or {})
        if doc.get("latest"):
            self.latest = BootFingerprint.from_dict(doc["latest"])

    def last_good(self, recipe_hash: str) -> BootFingerprint | None:
        """The last ready of ``recipe_hash`` that warned of nothing."""
        doc = self._good.get(recipe_hash)
        return None if doc is None else BootFingerprint.from_dict(doc)

    def note(self, fingerprint: BootFingerprint) -> None:
        """Keep ``fingerprint`` (as the yardstick too when it warned of nothing)."""
        self.latest = fingerprint
        if not fingerprint.warnings:
            self._good[fingerprint.recipe_hash] = fingerprint.as_dict()
        doc = {
            "latest": fingerprint.as_dict(),
            "good": self._good,
        }
        try:
            self._path.parent.mkdir(mode=0o700, exist_ok=True)
            atomic_write(self._path, json.dumps(doc, indent=2, sort_keys=True) + "\n", 0o600)
        except OSError as exc:
            LOG.warning("the boot fingerprint could not be kept: %s", exc)
