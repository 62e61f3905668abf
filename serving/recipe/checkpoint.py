"""Is the checkpoint whole? Every shard there, of the size its header implies, readable.

A cold start reads about 155 GiB over a Gen2 x4 riser and JIT-compiles for 20 to 45
minutes; a shard truncated by an interrupted copy fails it near the end, costing most of
an hour (club-170hx's operator lessons gate on a manifest of shard sizes and headers
before any GPU time; docs/domain.md). Two depths:

- ``quick`` (the start's preflight by default): every shard the index names exists, is a
  regular file, has a readable safetensors header, and is exactly as long as that header
  says (8 bytes of length, the JSON header, the tensors' bytes up to the furthest
  ``data_offsets`` end). One ``stat`` and one small read per shard: a 160 GiB layout takes
  milliseconds, sparse or not.
- ``full``: quick, then every shard hashed (SHA-256) against the manifest that
  ``fleetctl recipe manifest`` wrote once beside the weights; a flipped bit in the middle
  of a shard is found, at the cost of reading every byte.

Nothing here ever opens a non-regular file (a FIFO named as a shard would block).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from hwcheck.atomic import NotARegularFile, atomic_write
from hwcheck.regular_file import FileTooLarge, open_regular, read_regular

INDEX_NAME = "model.safetensors.index.json"
MANIFEST_NAME = "cmpfleet-manifest.json"
MANIFEST_VERSION = 1
# safetensors refuses headers above 100 MB (its MAX_HEADER_SIZE): anything larger is not one.
MAX_HEADER_BYTES = 100_000_000
MAX_INDEX_BYTES = 64 * 1024 * 1024
HASH_CHUNK_BYTES = 8 * 1024 * 1024
OTHER_WEIGHTS = (".bin", ".pt", ".pth", ".gguf")

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)


class VerifyMode(StrEnum):
    """``[serving] verify_checkpoint``: how deep the start's preflight looks."""

    QUICK = "quick"
    FULL = "full"
    OFF = "off"


_DEPTH = {VerifyMode.OFF: 0, VerifyMode.QUICK: 1, VerifyMode.FULL: 2}


def min_mode(first: VerifyMode, second: VerifyMode) -> VerifyMode:
    """The shallower of two depths (a request's path never hashes 160 GiB)."""
    return first if _DEPTH[first] <= _DEPTH[second] else second


@dataclass(frozen=True)
class ShardProblem:
    """One shard that would fail the load: the file and what is wrong, in one line."""

    file: str
    what: str

    def line(self) -> str:
        """``model-00003-of-00046.safetensors: 1,024 bytes short (...)``."""
        return f"{self.file}: {self.what}"


@dataclass
class CheckpointReport:
    """What a verification found: the shards looked at, their bytes, the problems."""

    path: Path
    mode: VerifyMode
    shards: int = 0
    total_bytes: int = 0
    problems: list[ShardProblem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No problem found at this depth."""
        return not self.problems

    def summary(self) -> str:
        """One line: whole, or the first problem and how many more."""
        if self.ok:
            size_gib = self.total_bytes / 2**30
            return f"{self.path}: {self.shards} shards, {size_gib:,.1f} GiB, whole ({self.mode})"
        first = self.problems[0]
        more = len(self.problems) - 1
        tail = f" (and {more} more)" if more else ""
        return f"checkpoint {self.path}: {first.line()}{tail}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``fleetctl recipe verify --json``)."""
        return {
            "path": str(self.path),
            "mode": str(self.mode),
            "ok": self.ok,
            "shards": self.shards,
            "total_bytes": self.total_bytes,
            "problems": [{"file": p.file, "what": p.what} for p in self.problems],
            "notes": list(self.notes),
        }


class CheckpointError(Exception):
    """The directory cannot be judged at all (missing, not a directory, a broken index)."""


def _index_shards(directory: Path) -> list[str] | None:
    """The shard names the index's ``weight_map`` names, in order; None without an index."""
    index = directory / INDEX_NAME
    if not index.exists():
        return None
    try:
        data = json.loads(read_regular(index, MAX_INDEX_BYTES))
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{index}: not a readable index ({_reason(exc)})") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"{index}: no weight_map: not a safetensors index")
    names: list[str] = []
    for value in weight_map.values():
        if not isinstance(value, str) or not value or "/" in value or value in (".", ".."):
            raise CheckpointError(f"{index}: weight_map names {value!r}: not a file name")
        if value not in names:
            names.append(value)
    return names


def shard_names(directory: Path) -> list[str]:
    """The weight files of a checkpoint: the index's shards, else every weight file there."""
    if not directory.is_dir():
        what = "no such directory" if not directory.exists() else "not a directory"
        raise CheckpointError(f"checkpoint {directory}: {what}")
    named = _index_shards(directory)
    if named is not None:
        return named
    found = sorted(
        entry.name
        for entry in directory.iterdir()
        if entry.name.endswith((".safetensors", *OTHER_WEIGHTS))
    )
    if not found:
        raise CheckpointError(f"checkpoint {directory}: no weight files and no {INDEX_NAME}")
    return found


def _reason(exc: BaseException) -> str:
    if isinstance(exc, (NotARegularFile, FileTooLarge)):
        return str(exc).split(": ", 1)[-1]
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc)


def safetensors_expected_size(path: Path) -> int:
    """The length the safetensors header of ``path`` implies (raises ``ValueError``)."""
    with open_regular(path) as stream:
        head = stream.read(8)
        if len(head) < 8:
            raise ValueError("shorter than a safetensors header (8 bytes)")
        (header_len,) = struct.unpack("<Q", head)
        if header_len == 0 or header_len > MAX_HEADER_BYTES:
            raise ValueError(f"header length {header_len:,} is not a safetensors header's")
        raw = stream.read(header_len)
    if len(raw) < header_len:
        raise ValueError(f"header cut short ({len(raw):,} of {header_len:,} bytes)")
    header = json.loads(raw)
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    end = 0
    for name, tensor in header.items():
        if name == "__metadata__":
            continue
        offsets = tensor.get("data_offsets") if isinstance(tensor, dict) else None
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(n, int) and n >= 0 for n in offsets)
            or offsets[0] > offsets[1]
        ):
            raise ValueError(f"tensor {name!r} has no valid data_offsets")
        end = max(end, int(offsets[1]))
    return 8 + int(header_len) + end


def check_shard(directory: Path, name: str) -> tuple[int, ShardProblem | None]:
    """(bytes on disk, the problem or None) for one shard at quick depth.

    The simulated engine loads its shards through this too (``serving.sim.checkpoint``):
    it fails on the shards the preflight refuses, and on no other.
    """
    path = directory / name
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0, ShardProblem(name, "missing (the index names it)")
    except OSError as exc:
        return 0, ShardProblem(name, f"cannot be read: {_reason(exc)}")
    if not name.endswith(".safetensors"):
        problem = ShardProblem(name, "empty") if size == 0 else None
        return size, problem
    try:
        expected = safetensors_expected_size(path)
    except (OSError, ValueError) as exc:
        return size, ShardProblem(name, f"unreadable header: {_reason(exc)}")
    if size < expected:
        short = expected - size
        return size, ShardProblem(
            name, f"{short:,} bytes short ({size:,} of {expected:,}): truncated, copy it again"
        )
    if size > expected:
        return size, ShardProblem(
            name, f"{size - expected:,} bytes longer than its header says ({expected:,})"
        )
    return size, None


def verify_quick(directory: Path) -> CheckpointReport:
    """Every shard present, a readable header, the size its header implies."""
    report = CheckpointReport(directory, VerifyMode.QUICK)
    names = shard_names(directory)
    for name in names:
        size, problem = check_shard(directory, name)
        report.shards += 1
        report.total_bytes += size
        if problem is not None:
            report.problems.append(problem)
    if not any(name.endswith(".safetensors") for name in names):
        report.notes.append("no safetensors shards: only presence and size were checked")
    return report


def sha256_file(path: Path, progress: Callable[[int], None] | None = None) -> str:
    """The SHA-256 of a regular file, read in chunks (``progress`` gets each chunk's size)."""
    digest = hashlib.sha256()
    with open_regular(path) as stream:
        while chunk := stream.read(HASH_CHUNK_BYTES):
            digest.update(chunk)
            if progress is not None:
                progress(len(chunk))
    return digest.hexdigest()


def _hash_all(
    directory: Path, names: Iterable[str], progress: Progress | None
) -> Iterable[tuple[str, int, str | None, str | None]]:
    """(name, size, sha256 or None, why not) for each shard, with byte progress."""
    sizes: dict[str, int] = {}
    for name in names:
        try:
            sizes[name] = (directory / name).stat().st_size
        except OSError:
            sizes[name] = -1
    total = sum(size for size in sizes.values() if size > 0)
    done = 0

    def step(count: int) -> None:
        nonlocal done
        done += count
        if progress is not None:
            progress(done, total)

    for name, size in sizes.items():
        if size < 0:
            yield name, 0, None, "missing"
            continue
        try:
            yield name, size, sha256_file(directory / name, step), None
        except OSError as exc:
            yield name, size, None, _reason(exc)


def write_manifest(directory: Path, progress: Progress | None = None) -> tuple[Path, int]:
    """Hash every shard and write ``cmpfleet-manifest.json`` beside them: (path, shards).

    Refuses (``CheckpointError``) a checkpoint that is not whole at quick depth: a manifest
    of a truncated shard would make the truncation the reference.
    """
    quick = verify_quick(directory)
    if not quick.ok:
        raise CheckpointError(f"{quick.summary()}: no manifest written")
    files: dict[str, dict[str, Any]] = {}
    for name, size, sha, why in _hash_all(directory, shard_names(directory), progress):
        if sha is None:
            raise CheckpointError(f"{directory / name}: {why}: no manifest written")
        files[name] = {"size": size, "sha256": sha}
    target = directory / MANIFEST_NAME
    body = {"version": MANIFEST_VERSION, "algorithm": "sha256", "files": files}
    atomic_write(target, json.dumps(body, indent=1, sort_keys=True) + "\n", mode=0o644)
    return target, len(files)


def read_manifest(directory: Path) -> dict[str, dict[str, Any]]:
    """The manifest's ``files`` (name -> size, sha256); ``CheckpointError`` when absent."""
    path = directory / MANIFEST_NAME
    if not path.exists():
        raise CheckpointError(
            f"checkpoint {directory}: no {MANIFEST_NAME} to compare with "
            "(write it once with `fleetctl recipe manifest`)"
        )
    try:
        data = json.loads(read_regular(path, MAX_INDEX_BYTES))
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: not a readable manifest ({_reason(exc)})") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or data.get("version") != MANIFEST_VERSION:
        raise CheckpointError(f"{path}: not a cmpfleet manifest (version {MANIFEST_VERSION})")
    return files


def verify_full(directory: Path, progress: Progress | None = None) -> CheckpointReport:
    """Quick, then every shard's SHA-256 against the manifest."""
    report = verify_quick(directory)
    report.mode = VerifyMode.FULL
    if not report.ok:
        return report  # a missing or short shard is the answer; no need to read 160 GiB
    manifest = read_manifest(directory)
    names = shard_names(directory)
    for name in sorted(set(manifest) - set(names)):
        report.problems.append(ShardProblem(name, "in the manifest, not in the checkpoint"))
    for name, size, sha, why in _hash_all(directory, names, progress):
        entry = manifest.get(name)
        if sha is None:
            report.problems.append(ShardProblem(name, f"cannot be hashed: {why}"))
        elif not isinstance(entry, dict):
            report.notes.append(f"{name}: not in the manifest (written before it was added?)")
        elif entry.get("size") != size:
            report.problems.append(
                ShardProblem(name, f"{size:,} bytes, the manifest says {entry.get('size')}")
            )
        elif entry.get("sha256") != sha:
            report.problems.append(
                ShardProblem(name, "content differs from the manifest (sha256): copy it again")
            )
    return report


def verify_checkpoint(
    directory: Path, mode: VerifyMode, progress: Progress | None = None
) -> CheckpointReport:
    """The checkpoint at ``directory`` verified at ``mode`` (``OFF`` looks at nothing)."""
    if mode is VerifyMode.OFF:
        return CheckpointReport(directory, mode, notes=["verification is off"])
    if mode is VerifyMode.FULL:
        return verify_full(directory, progress)
    return verify_quick(directory)


def write_sparse_checkpoint(
    directory: Path, shard_bytes: Iterable[int], *, tensors_per_shard: int = 4
) -> list[str]:
    """A checkpoint of sparse shards (real headers, holes for the data): for simulations.

    Each shard is a valid safetensors file whose tensors' offsets add up to its size; the
    data is a hole, so a 160 GiB layout costs no disk. Returns the shard names.
    """
    sizes = list(shard_bytes)
    count = len(sizes)
    directory.mkdir(parents=True, exist_ok=True)
    weight_map: dict[str, str] = {}
    names: list[str] = []
    for number, data_bytes in enumerate(sizes, start=1):
        name = f"model-{number:05d}-of-{count:05d}.safetensors"
        names.append(name)
        step = max(1, data_bytes // tensors_per_shard)
        header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
        start = 0
        for tensor in range(tensors_per_shard):
            end = data_bytes if tensor == tensors_per_shard - 1 else min(data_bytes, start + step)
            key = f"model.layers.{number}.t{tensor}.weight"
            header[key] = {"dtype": "U8", "shape": [end - start], "data_offsets": [start, end]}
            weight_map[key] = name
            start = end
        raw = json.dumps(header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)  # safetensors pads the header to 8 bytes
        fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, struct.pack("<Q", len(raw)) + raw)
            os.ftruncate(fd, 8 + len(raw) + data_bytes)
        finally:
            os.close(fd)
    index = {"metadata": {"total_size": sum(sizes)}, "weight_map": weight_map}
    (directory / INDEX_NAME).write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    return names
