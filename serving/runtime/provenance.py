"""What build ran: the facts of one engine launch that tell two builds apart.

The fixes of these rigs are patch numbers (0007 the NaN-logit guard, 0020-0023 the
tripwires and ``reasoning_content``) baked into images that are rebuilt under the same
tag, so the tag says nothing. A build is: the recipe's hash (the flags and environment),
the image's ID and digest (``docker|podman image inspect`` of the image the container
runs), the engine's ``GET /version``, the image labels named in ``[serving]
provenance_labels`` (a patch-series label, say) and, for a bare process, the output of
``[serving] provenance_command`` (e.g. ``git -C /opt/vllm describe --dirty``). Two
launches with the same facts are the same build; any difference is a new one.

Pure: the parsers here read what the runtime's CLI, the engine and the command printed;
running them is ``serving.runtime.foreign_containers``' (the one module of ``serving``
that runs the host's CLIs) and the daemon's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

OUTPUT_CHARS = 2000
VERSION_CHARS = 200  # vLLM's is "0.11.0" or a dev build's "0.11.1.dev12+g0a1b2c3d"
VERSION_MAX_BYTES = 64 * 1024  # a /version answer read past this is refused, not stored
DEFAULT_LABELS = ("org.opencontainers.image.version", "org.opencontainers.image.revision")


@dataclass(frozen=True, slots=True)
class ImageFacts:
    """What ``image inspect`` says of one image: its ID, digests and labels."""

    image_id: str
    digests: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)


class ProvenanceError(ValueError):
    """Output that is not what the runtime prints (the message says what)."""


def parse_image_inspect(text: str) -> ImageFacts:
    """``docker|podman image inspect IMAGE`` (a JSON list of one image) -> ``ImageFacts``.

    Docker puts the labels under ``Config.Labels`` and the ID as ``sha256:<hex>``; podman
    also has a top-level ``Labels``, a bare hex ``Id`` and a ``Digest``: both are read.
    """
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ProvenanceError(f"image inspect printed no JSON: {exc}") from None
    image = document[0] if isinstance(document, list) and document else document
    if not isinstance(image, dict) or not isinstance(image.get("Id"), str):
        raise ProvenanceError("image inspect printed no image with an Id")
    image_id = str(image["Id"])
    if ":" not in image_id:
        image_id = f"sha256:{image_id}"
    digests = [str(d) for d in image.get("RepoDigests") or [] if isinstance(d, str)]
    digest = image.get("Digest")
    if isinstance(digest, str) and digest and not any(digest in d for d in digests):
        digests.append(digest)
    config = image.get("Config") if isinstance(image.get("Config"), dict) else {}
    labels: dict[str, str] = {}
    for source in (image.get("Labels"), config.get("Labels") if config else None):
        if isinstance(source, dict):
            labels.update({str(k): str(v) for k, v in source.items()})
    return ImageFacts(image_id, tuple(digests), labels)


def printable(text: str, limit: int, keep_newlines: bool = False) -> str:
    r"""Engine text safe for a terminal and a log line: controls escaped, at most ``limit``.

    What an engine, an image or a command printed reaches ``fleetctl builds``, the
    dashboard and fleetd's log: an ESC sequence there drives the terminal, a newline forges
    a log line (issue 36). Each control character (C0, DEL, C1) becomes its ``\xNN``
    escape; with ``keep_newlines``, newlines and tabs of a multi-line output stay.
    """
    out: list[str] = []
    for char in text:
        code = ord(char)
        if keep_newlines and char in "\n\t":
            out.append(char)
        elif code < 0x20 or 0x7F <= code < 0xA0:
            out.append(f"\\x{code:02x}")
        else:
            out.append(char)
    clean = "".join(out)
    return clean if len(clean) <= limit else clean[:limit] + "..."


def parse_version(document: object) -> str | None:
    """``GET /version``'s ``version`` (vLLM answers ``{"version": "0.11.0"}``), printable."""
    if isinstance(document, dict) and isinstance(document.get("version"), str):
        return printable(str(document["version"]).strip(), VERSION_CHARS) or None
    return None


def picked_labels(labels: Mapping[str, str], wanted: Sequence[str]) -> dict[str, str]:
    """The labels named in ``wanted`` that the image has, in that order (values printable)."""
    return {name: printable(labels[name], OUTPUT_CHARS) for name in wanted if name in labels}


def output_text(raw: str) -> str:
    """A command's output as kept: stripped, printable, at most ``OUTPUT_CHARS`` characters."""
    return printable(raw.strip(), OUTPUT_CHARS, keep_newlines=True)


@dataclass(frozen=True, slots=True)
class BuildFacts:
    """The facts of one launch's build; ``None`` where the rig cannot say.

    ``notes`` say why a fact is missing (a runtime that did not answer, a command that
    failed); they are not part of the build's identity.
    """

    recipe_hash: str
    image: str | None = None
    image_id: str | None = None
    image_digest: str | None = None
    engine_version: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    provenance_output: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The build's identity: a hash of every fact but the notes (64 hex)."""
        identity = {
            "recipe_hash": self.recipe_hash,
            "image_id": self.image_id,
            "image_digest": self.image_digest,
            "engine_version": self.engine_version,
            "labels": dict(sorted(self.labels.items())),
            "provenance_output": self.provenance_output,
        }
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (the key included)."""
        data = asdict(self)
        data["labels"] = dict(self.labels)
        data["notes"] = list(self.notes)
        data["key"] = self.key
        return data


def image_facts_of(
    recipe_hash: str,
    image: str,
    facts: ImageFacts,
    wanted_labels: Sequence[str],
) -> BuildFacts:
    """A container launch's build from its image's inspect (the first digest is kept)."""
    return BuildFacts(
        recipe_hash=recipe_hash,
        image=image,
        image_id=facts.image_id,
        image_digest=facts.digests[0] if facts.digests else None,
        labels=picked_labels(facts.labels, wanted_labels),
    )


def short_digest(digest: str | None) -> str:
    """``repo@sha256:0123456789ab`` (the first 12 hex), or ``-``."""
    if not digest:
        return "-"
    head, sep, hexes = digest.partition("sha256:")
    return f"{head}{sep}{hexes[:12]}" if sep else digest[:40]


def build_name(key: str, image_digest: str | None, engine_version: str | None) -> str:
    """How a person is shown a build: ``build 3f2a9c1d (repo@sha256:ab12..., 0.11.0)``."""
    parts = [p for p in (short_digest(image_digest) if image_digest else None, engine_version) if p]
    shown = f" ({', '.join(parts)})" if parts else ""
    return f"build {key[:8]}{shown}"
