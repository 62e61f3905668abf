"""``fleetctl builds``: the engine builds seen, their canary verdicts, the regressions.

One row per build (newest seen first): its short key, image digest, engine version, the
labels recorded, first and last seen, and each canary's newest verdict on it; then one
line per regression ("copy_depth at 96k: 100% on build A, 15% on build B since ..."), and
the last good build (the one ``fleetctl rollback`` serves).
Exit 0; a daemon that cannot be reached exits 3.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_UNKNOWN, Output
from daemon.cli.rig.canary import RESULT_STYLE, figure_text


def _verdicts(canaries: dict[str, Any]) -> Text:
    text = Text()
    for name, verdict in sorted(canaries.items()):
        if text:
            text.append(", ")
        result = str(verdict.get("result"))
        shown = figure_text(verdict)
        text.append(f"{name} ")
        text.append(result, style=RESULT_STYLE.get(result, ""))
        if shown != "-":
            text.append(f" {shown}")
    return text


def _row(build: dict[str, Any]) -> list[str | Text]:
    labels = ", ".join(f"{k}={v}" for k, v in (build.get("labels") or {}).items())
    image = str(build.get("image_digest") or build.get("image") or "-")
    extra = str(build.get("provenance_output") or "")
    return [
        ("* " if build.get("current") else "") + str(build.get("build_key", ""))[:8],
        image if not extra else f"{image} {extra.splitlines()[0][:60]}",
        str(build.get("engine_version") or "-"),
        labels or "-",
        str(build.get("first_seen") or ""),
        str(build.get("last_seen") or ""),
        _verdicts(build.get("canaries") or {}),
    ]


def show(out: Output, client: FleetClient, engine: str | None = None) -> int:
    """Print one engine's builds (``engine``: a side engine's profile) and the regressions."""
    try:
        document: dict[str, Any] = client.get("/api/v1/builds", {"engine": engine})
    except ClientError as exc:
        out.fail(str(exc), EXIT_UNKNOWN)
    if out.json_mode:
        out.emit_json(document)
        return 0
    builds = list(document.get("builds") or [])
    if not builds:
        out.line("no engine build recorded yet (one is recorded when the engine gets ready)")
        return 0
    out.table(
        f"engine {engine} builds (* serving now)" if engine else "engine builds (* serving now)",
        ["build", "image", "version", "labels", "first seen", "last seen", "canaries"],
        [_row(build) for build in builds],
    )
    for regression in document.get("regressions") or []:
        out.line(f"regression: {regression.get('text')}")
    good = document.get("last_good")
    if good:
        out.line(f"last good build: {good.get('name')} (fleetctl rollback serves it)")
    return 0
