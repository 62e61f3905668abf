"""The simulated container runtime's images: an ID, a digest and labels per tag, rebuildable.

On a real rig ``docker image inspect`` tells two builds under one tag apart by their ID
and digest; the simulation keeps the same facts in one JSON file in the state dir
(``sim-images.json``). Asking for an image the first time "pulls" it (build 1); a
rebuild (``POST /api/v1/sim/rebuild``) keeps the tag and gives it a new ID and digest,
and may change the build's labels, its ``/version`` and how the simulated engine behaves
(its ``--sim-*`` flags). The simulated engine reads its own build from the same file at
start (``--sim-build-file``), so a rebuilt image runs with the new behaviour after the
next engine start, exactly as a real rebuilt image does.

Every build stays known by its digest (``builds``), as a registry keeps an image's old
digests: ``image inspect repo@sha256:...`` and an engine started from that reference
(``--sim-image``) get that build, so ``fleetctl rollback`` can serve an earlier build
while the tag has moved on.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hwcheck.atomic import atomic_write

IMAGES_FILE = "sim-images.json"
SIM_ENGINE_IMAGE = "cmpfleet/sim-engine:latest"
SIM_ENGINE_VERSION = "0.11.0+cmpfleet.sim"
DEFAULT_LABELS = {
    "org.opencontainers.image.title": "cmpfleet simulated engine",
    "dsv4.patch-series": "0001-0023",
}


class ImageStoreError(Exception):
    """The image file cannot be read or written (the message names it)."""


def _hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def is_digest_ref(image: str) -> bool:
    """``repo@sha256:...``: an image named by its digest, not by a tag."""
    return "@sha256:" in image


def _repository(image: str) -> str:
    """``repo`` of ``repo:tag`` (a registry port's colon is not a tag)."""
    head, sep, tag = image.rpartition(":")
    return head if sep and "/" not in tag else image


def image_build(image: str, build: int, **extra: Any) -> dict[str, Any]:
    """The facts of build number ``build`` of ``image`` (deterministic: a test can predict)."""
    entry: dict[str, Any] = {
        "image": image,
        "build": build,
        "id": f"sha256:{_hex(f'id:{image}#{build}')}",
        "digest": f"{_repository(image)}@sha256:{_hex(f'digest:{image}#{build}')}",
        "labels": dict(DEFAULT_LABELS),
        "version": SIM_ENGINE_VERSION,
        "args": [],
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    entry.update(extra)
    return entry


class ImageStore:
    """The simulated images of one state dir (thread-safe; one writer per process)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def _read(self) -> dict[str, Any]:
        try:
            document = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {"images": {}, "builds": {}}
        except (OSError, ValueError) as exc:
            raise ImageStoreError(f"{self.path}: cannot read the simulated images: {exc}") from None
        if not isinstance(document, dict) or not isinstance(document.get("images"), dict):
            raise ImageStoreError(f"{self.path}: not a simulated image file")
        if not isinstance(document.get("builds"), dict):
            document["builds"] = {}
        return document

    @staticmethod
    def _keep(document: dict[str, Any], entry: dict[str, Any]) -> None:
        """Remember ``entry`` by its digest (a registry keeps old digests pullable)."""
        document["builds"][str(entry["digest"])] = entry

    def _write(self, document: dict[str, Any]) -> None:
        try:
            atomic_write(self.path, json.dumps(document, indent=1, sort_keys=True) + "\n")
        except OSError as exc:
            raise ImageStoreError(f"{self.path}: cannot write: {exc.strerror or exc}") from None

    def facts(self, image: str) -> dict[str, Any]:
        """The current build of ``image`` (pulled, as build 1, the first time it is asked).

        A digest reference (``repo@sha256:...``) is that build, whatever its tag is now;
        one never built here is ``ImageStoreError`` (as a registry answers "not found").
        """
        with self._lock:
            document = self._read()
            if is_digest_ref(image):
                found = document["builds"].get(image)
                if not isinstance(found, dict):
                    raise ImageStoreError(f"no such image: {image}")
                return dict(found)
            entry = document["images"].get(image)
            if not isinstance(entry, dict):
                entry = image_build(image, 1)
                document["images"][image] = entry
                self._keep(document, entry)
                self._write(document)
            elif entry.get("digest") not in document["builds"]:
                self._keep(document, entry)  # a file written before builds were kept
                self._write(document)
            return dict(entry)

    def rebuild(
        self,
        image: str,
        *,
        args: Sequence[str] = (),
        labels: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> dict[str, Any]:
        """Build ``image`` again under the same tag: a new ID and digest (and what changed)."""
        with self._lock:
            document = self._read()
            old = document["images"].get(image)
            old = old if isinstance(old, dict) else image_build(image, 1)
            entry = image_build(
                image,
                int(old.get("build", 1)) + 1,
                labels={**dict(old.get("labels") or {}), **dict(labels or {})},
                version=version or old.get("version") or SIM_ENGINE_VERSION,
                args=[str(arg) for arg in args],
            )
            self._keep(document, old)
            document["images"][image] = entry
            self._keep(document, entry)
            self._write(document)
            return dict(entry)


def build_of(path: str | None, image: str | None = None) -> dict[str, Any] | None:
    """The simulated engine's own build, read once at its start (``None``: no file yet).

    ``image``: the tag or digest reference it runs (the simulated engine's image by default).
    """
    if not path:
        return None
    image = image or SIM_ENGINE_IMAGE
    try:
        document = json.loads(Path(path).read_text())
        table = "builds" if is_digest_ref(image) else "images"
        entry = document[table][image]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return entry if isinstance(entry, dict) else None


def build_flag(argv: Sequence[str], flag: str = "--sim-build-file") -> str | None:
    """The value of ``flag`` (``--sim-build-file``, ``--sim-image``) in ``argv``.

    Read before the flags are parsed: the build's own flags join the command line.
    """
    for index, arg in enumerate(argv):
        if arg == flag and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(f"{flag}="):
            return arg.split("=", 1)[1]
    return None
