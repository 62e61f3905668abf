"""The crash bundles on disk: one directory per event, bounded, pruned oldest first.

``<state dir>/crashes/<id>/`` (0700) holds one file per part (0600, each written by
``hwcheck.atomic.atomic_write``): what a reboot would wipe (``cards.json``,
``kernel.json``, ``inflight.json``) is written first, the rest after, ``summary.json``
last. A bundle is at most ``BUNDLE_MAX_BYTES`` (the engine log tail is cut from its
start to fit) and every bundle together at most ``max_total_bytes``: the oldest go first.
Writing raises ``OSError`` (a full disk, a read-only dir): the caller says so and goes on;
nothing here may hold recovery back. ``export`` makes a tarball safe to attach to a public
issue: every text masked again, the host name replaced unless asked for.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import stat
import tarfile
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hwcheck.atomic import atomic_write
from serving.errors import InvalidInput, NotFound
from serving.evidence.settings import BUNDLE_MAX_BYTES

CRASHES_DIR = "crashes"
SUMMARY = "summary.json"
ENGINE_LOG = "engine.log"
DIR_MODE = 0o700
FILE_MODE = 0o600
HOST_MASK = "<host>"
_ID = re.compile(r"^\d{8}T\d{6}(?:\d{3})?Z-[a-z0-9_]+(?:-\d+)?$")


def new_bundle_id(at: datetime, kind: str) -> str:
    """``20261206T050102123Z-xid31``: sortable by time, the fault in its name."""
    clean = re.sub(r"[^a-z0-9_]+", "_", kind.lower()).strip("_") or "stop"
    return f"{at.astimezone(UTC):%Y%m%dT%H%M%S}{at.microsecond // 1000:03d}Z-{clean[:24]}"


def check_id(bundle_id: str) -> str:
    """``bundle_id`` when it is one (never a path): else one line naming it."""
    if not _ID.match(bundle_id):
        raise InvalidInput(f"{bundle_id!r} is not a crash bundle id (fleetctl crashes lists them)")
    return bundle_id


def _json(doc: Any) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n"


class BundleStore:
    """The bundles under one state dir."""

    def __init__(self, state_dir: Path, max_total_bytes: int) -> None:
        self.root = state_dir / CRASHES_DIR
        self.max_total_bytes = max_total_bytes

    # -- writing --------------------------------------------------------------------
    def open(self, bundle_id: str) -> Path:
        """Create the bundle's directory (0700); a second event in the same ms gets ``-N``."""
        self.root.mkdir(mode=DIR_MODE, exist_ok=True)
        os.chmod(self.root, DIR_MODE)
        path = self.root / bundle_id
        suffix = 1
        while True:
            try:
                path.mkdir(mode=DIR_MODE)
                break
            except FileExistsError:
                suffix += 1
                path = self.root / f"{bundle_id}-{suffix}"
        os.chmod(path, DIR_MODE)
        return path

    def write_part(self, bundle: Path, name: str, doc: Any) -> int:
        """One part (JSON, or text for ``.log``), 0600; its size in bytes."""
        text = doc if isinstance(doc, str) else _json(doc)
        atomic_write(bundle / name, text, FILE_MODE)
        return len(text.encode("utf-8"))

    def write_log(self, bundle: Path, lines: list[str], budget_bytes: int) -> int:
        """The engine log tail, cut from its start to ``budget_bytes``; its size."""
        kept: list[str] = []
        size = 0
        for line in reversed(lines):
            cost = len(line.encode("utf-8")) + 1
            if size + cost > budget_bytes:
                kept.append(f"[... {len(lines) - len(kept)} earlier lines cut: bundle size cap]")
                break
            kept.append(line)
            size += cost
        return self.write_part(bundle, ENGINE_LOG, "\n".join(reversed(kept)) + "\n")

    def budget_left(self, bundle: Path) -> int:
        """Bytes this bundle may still take."""
        return max(BUNDLE_MAX_BYTES - _size(bundle), 0)

    def prune(self, keep: str | None = None) -> list[str]:
        """Remove the oldest bundles until all fit ``max_total_bytes``; their ids.

        ``keep`` (the bundle just written) is never removed.
        """
        ids = self.ids()
        sizes = {bundle_id: _size(self.root / bundle_id) for bundle_id in ids}
        total = sum(sizes.values())
        removed: list[str] = []
        for bundle_id in reversed(ids):  # oldest first
            if total <= self.max_total_bytes:
                break
            if bundle_id == keep:
                continue
            shutil.rmtree(self.root / bundle_id, ignore_errors=True)
            total -= sizes[bundle_id]
            removed.append(bundle_id)
        return removed

    # -- reading --------------------------------------------------------------------
    def ids(self) -> list[str]:
        """Every bundle's id, newest first."""
        try:
            names = [entry.name for entry in os.scandir(self.root) if entry.is_dir()]
        except OSError:  # none yet, or the dir is not readable: nothing to list
            return []
        return sorted((name for name in names if _ID.match(name)), reverse=True)

    def summary(self, bundle_id: str) -> dict[str, Any] | None:
        """A bundle's ``summary.json`` (None while it is still being written or is gone)."""
        try:
            doc: dict[str, Any] = json.loads((self.root / bundle_id / SUMMARY).read_text())
        except (OSError, ValueError):
            return None
        return doc

    def summaries(self) -> list[dict[str, Any]]:
        """Every finished bundle's summary, newest first."""
        return [doc for bundle_id in self.ids() if (doc := self.summary(bundle_id)) is not None]

    def read(self, bundle_id: str) -> dict[str, Any]:
        """Every part of a bundle: the JSON parts parsed, the log as lines."""
        path = self.root / check_id(bundle_id)
        if not path.is_dir():
            raise NotFound(f"no crash bundle {bundle_id} (fleetctl crashes lists them)")
        doc: dict[str, Any] = {}
        for part in sorted(path.iterdir()):
            if not part.is_file() or part.name.startswith("."):
                continue
            text = part.read_text(errors="replace")
            if part.suffix == ".json":
                try:
                    doc[part.stem] = json.loads(text)
                except ValueError:
                    doc[part.stem] = None
            else:
                doc[part.name.replace(".", "_")] = text.splitlines()
        return doc

    def export(
        self,
        bundle_id: str,
        mask: Callable[[str], str],
        hostname: str | None,
    ) -> bytes:
        """A ``.tar.gz`` of the bundle: every file masked again; the host name replaced.

        ``hostname`` is this host's name, replaced by ``<host>`` everywhere (None: kept,
        ``--with-hostname``).
        """
        path = self.root / check_id(bundle_id)
        if not path.is_dir():
            raise NotFound(f"no crash bundle {bundle_id} (fleetctl crashes lists them)")
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for part in sorted(path.iterdir()):
                if not part.is_file() or part.name.startswith("."):
                    continue
                text = mask(part.read_text(errors="replace"))
                if hostname:
                    text = re.sub(rf"\b{re.escape(hostname)}\b", HOST_MASK, text)
                data = text.encode("utf-8")
                info = tarfile.TarInfo(f"{path.name}/{part.name}")
                info.size = len(data)
                info.mode = FILE_MODE
                info.mtime = int(part.stat().st_mtime)
                tar.addfile(info, io.BytesIO(data))
        return buffer.getvalue()


def _size(path: Path) -> int:
    total = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(path):
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(info.st_mode):
                    total += info.st_size
    return total


def as_mapping(doc: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``doc``, or an empty mapping."""
    return {} if doc is None else doc
