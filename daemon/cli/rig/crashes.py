"""``fleetctl crashes``, ``crash show ID`` and ``crash export ID``: the crash black box.

``crashes`` lists the bundles (when, class, verdict, card and rank, depth); ``crash show``
gives one bundle's verdict and the evidence behind it in 80 columns; ``crash export``
writes the bundle's tarball (masked, no prompt text, the host name only with
``--with-hostname``) to a file safe to attach to a public issue. A daemon that cannot be
reached exits 3; an unknown bundle exits 1 with one line.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import quote

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_UNKNOWN, Output
from daemon.cli.transport import Unreachable
from hwcheck.atomic import atomic_write

WIDTH = 80


def _where(doc: dict[str, Any]) -> str:
    parts = []
    if doc.get("card") is not None:
        parts.append(f"card {doc['card']}")
    if doc.get("rank") is not None:
        parts.append(f"rank {doc['rank']}")
    return ", ".join(parts) or "-"


def _depth(doc: dict[str, Any]) -> str:
    depth = doc.get("depth_tokens")
    return "-" if depth is None else f"{int(depth):,}"


def _get(out: Output, client: FleetClient, path: str) -> Any:
    try:
        return client.get(path)
    except ClientError as exc:
        out.fail(str(exc), EXIT_UNKNOWN if exc.unreachable else EXIT_FAILED)


def list_crashes(out: Output, client: FleetClient) -> int:
    """The bundles, newest first."""
    document: dict[str, Any] = _get(out, client, "/api/v1/crashes")
    if out.json_mode:
        out.emit_json(document)
        return 0
    if document.get("degraded"):
        out.line(f"WARNING: {document['degraded']}")
    crashes = list(document.get("crashes") or [])
    if not crashes:
        out.line("no crash bundle kept (one is written at every latch, stop and crash)")
        return 0
    out.table(
        "crash bundles (newest first)",
        ["id", "when", "class", "verdict", "card/rank", "depth"],
        [
            [
                str(doc.get("id")),
                str(doc.get("ts", "")).replace("+00:00", "Z"),
                str(doc.get("crash_class") or doc.get("fault") or doc.get("kind") or "-"),
                str((doc.get("verdict") or {}).get("rule", "unknown")),
                _where(doc),
                _depth(doc),
            ]
            for doc in crashes
        ],
    )
    return 0


def show_lines(summary: dict[str, Any]) -> list[str]:
    """One bundle's verdict and evidence, each line at most 80 columns."""
    verdict = summary.get("verdict") or {}
    lines = [
        f"crash {summary.get('id')}",
        f"when:     {summary.get('ts')}",
        f"event:    {summary.get('action')} ({summary.get('trigger')}): {summary.get('reason')}",
        f"class:    {summary.get('crash_class') or summary.get('fault') or '-'}",
        f"where:    {_where(summary)}, depth {_depth(summary)} tokens",
        f"verdict:  {verdict.get('rule')} ({verdict.get('confidence')} confidence)",
        f"          {verdict.get('summary')}",
        f"do:       {verdict.get('advice')}",
        "evidence:",
    ]
    for item in verdict.get("evidence") or []:
        lines.append(f"  {item.get('kind')}: {item.get('value')}")
    if verdict.get("source"):
        lines.append(f"source:   {verdict['source']}")
    repeats = [
        f"{key.split('/', 1)[-1]} x{count}"
        for key, count in sorted((summary.get("recurrence") or {}).items())
        if count > 1
    ]
    if repeats:
        lines.append(f"repeats:  {', '.join(repeats)}")
    escalation = summary.get("escalation")
    if escalation:
        lines.append(f"RECURRING: {escalation.get('summary')}")
        lines.append(f"          {escalation.get('advice')}")
    wrapped: list[str] = []
    for line in lines:
        indent = "            " if line.startswith("  ") else "          "
        wrapped += textwrap.wrap(
            line, WIDTH, subsequent_indent=indent, break_long_words=True, break_on_hyphens=False
        ) or [""]
    return wrapped


def _checked(out: Output, bundle_id: str) -> str:
    """``bundle_id`` when it is one; else one line naming it (exit 2), never a request."""
    from serving.errors import InvalidInput
    from serving.evidence.bundles import check_id

    try:
        return check_id(bundle_id)
    except InvalidInput as exc:
        out.fail(exc.message, EXIT_BAD_INPUT)


def show(out: Output, client: FleetClient, bundle_id: str) -> int:
    """``crash show ID``."""
    bundle_id = _checked(out, bundle_id)
    document: dict[str, Any] = _get(out, client, f"/api/v1/crashes/{quote(bundle_id, safe='')}")
    if out.json_mode:
        out.emit_json(document)
        return 0
    for line in show_lines(document.get("summary") or {}):
        out.line(line)
    return 0


def export(
    out: Output, client: FleetClient, bundle_id: str, output: Path, with_hostname: bool
) -> int:
    """``crash export ID --output FILE``: the tarball, written 0600."""
    bundle_id = _checked(out, bundle_id)
    path = f"/api/v1/crashes/{quote(bundle_id, safe='')}/export"
    try:
        reply = client.send(
            "GET", path, params={"with_hostname": "true" if with_hostname else "false"}
        )
    except Unreachable as exc:
        out.fail(f"cannot reach fleetd at {client.url}: {exc}", EXIT_UNKNOWN)
    if reply.status >= 400:
        try:
            detail = reply.json().get("detail")
        except (ValueError, AttributeError):
            detail = None
        out.fail(str(detail or f"HTTP {reply.status}"), EXIT_FAILED)
    try:
        atomic_write(output, reply.body, 0o600)
    except OSError as exc:
        out.fail(f"{output}: cannot write it: {exc.strerror or exc}", EXIT_FAILED)
    if out.json_mode:
        out.emit_json({"id": bundle_id, "output": os.fspath(output), "bytes": len(reply.body)})
    else:
        out.line(f"wrote {output} ({len(reply.body):,} bytes, masked, no prompt text)")
    return 0
