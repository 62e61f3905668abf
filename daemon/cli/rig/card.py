"""``fleetctl card NAME|SERIAL``: a card's passport; ``card export SERIAL``; out of service.

``NAME`` is an index of the cards now, a serial, a UUID or a PCI address. ``--out-of-service
REASON`` benches the card (shown, never paged, in no profile's gate), ``--in-service``
brings it back. ``card export SERIAL [--output FILE]`` writes the passport as JSON and a
short HTML page beside it (for a sale or an RMA: no host name, no secret).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_BAD_INPUT, EXIT_FAILED, Output
from daemon.rig.passport_page import bench_line, passport_html
from hwcheck.atomic import atomic_write


def _fetch(out: Output, client: FleetClient, name: str) -> dict[str, Any]:
    try:
        document: dict[str, Any] = client.get(f"/api/v1/cards/{quote(name, safe='')}")
    except ClientError as exc:
        out.fail(str(exc), EXIT_BAD_INPUT if exc.status == 404 else EXIT_FAILED)
    return document


def _print(out: Output, doc: dict[str, Any]) -> None:
    now = doc.get("now") or {}
    who = doc.get("serial") or doc["uuid"]
    place = f"card {now['index']} at {now['pci_bus_id']}" if now else "not in this rig now"
    out.line(f"{doc.get('name')} serial {who} ({doc['uuid']}): {place}")
    if doc.get("first_time"):
        out.line("first seen on this rig now: no history yet")
    oos = doc.get("out_of_service")
    if oos:
        out.line(f"OUT OF SERVICE since {oos.get('since')}: {oos.get('reason')}")
    if now:
        out.line(
            f"board {now.get('board_id')}, VBIOS {now.get('vbios_version')}, "
            f"{now.get('memory_total_mib')} MiB ({now.get('unlock')}), "
            f"power {now.get('power_min_limit_w')}-{now.get('power_max_limit_w')} W "
            f"(default {now.get('power_default_limit_w')}, cap {now.get('power_limit_w')}), "
            f"link {now.get('pcie')} of {now.get('pcie_max')}"
        )
    slots = doc.get("slots") or []
    out.line(
        "slots: "
        + "; ".join(f"{s['pci_bus_id']} (card {s['index']}) since {s['since']}" for s in slots)
    )
    diags = doc.get("diags") or []
    out.line(f"diagnostics: {len(diags) or 'none yet'}")
    for run in diags[:10]:
        out.line(f"  {run['ts']} {run['kind']}: {run['outcome']} {run['verdict']}".rstrip())
    crashes = doc.get("crashes") or []
    out.line(f"crashes: {len(crashes) or 'none'}")
    for crash in crashes[:10]:
        out.line(f"  {crash['ts']} {crash['message']}")
    bench = doc.get("bench") or []
    out.line(f"bench (caps, tok/W): {len(bench) or 'none yet'}")
    for entry in bench[:10]:
        out.line("  " + bench_line(entry))
    xids = doc.get("xids") or []
    out.line(f"Xid errors: {len(xids) or 'none'}")
    for xid in xids[:10]:
        out.line(f"  {xid['ts']} Xid {xid['xid']}: {xid['message']}")


def show(out: Output, client: FleetClient, name: str) -> int:
    """``card NAME``: the passport."""
    document = _fetch(out, client, name)
    if out.json_mode:
        out.emit_json(document)
    else:
        _print(out, document)
    return 0


def mark(out: Output, client: FleetClient, name: str, reason: str | None) -> int:
    """``card NAME --out-of-service REASON`` / ``--in-service``."""
    try:
        document: dict[str, Any] = client.post(
            f"/api/v1/cards/{quote(name, safe='')}/service", {"out_of_service": reason}
        )
    except ClientError as exc:
        out.fail(str(exc), EXIT_BAD_INPUT if exc.status in (400, 404, 422) else EXIT_FAILED)
    if out.json_mode:
        out.emit_json(document)
    else:
        who = document.get("serial") or document["uuid"]
        what = f"out of service: {reason}" if reason else "back in service"
        out.line(f"card {who} {what}")
    return 0


def export(out: Output, client: FleetClient, serial: str, output: Path | None) -> int:
    """``card export SERIAL [--output FILE]``: FILE (JSON) and FILE's ``.html`` beside it."""
    document = _fetch(out, client, serial)
    target = output or Path(f"passport-{document.get('serial') or document['uuid']}.json")
    page = target.with_suffix(".html")
    try:
        atomic_write(target, json.dumps(document, indent=2) + "\n", mode=0o644)
        atomic_write(page, passport_html(document), mode=0o644)
    except OSError as exc:
        out.fail(f"{target}: cannot be written: {exc.strerror or exc}", EXIT_BAD_INPUT)
    if out.json_mode:
        out.emit_json({"json": str(target), "html": str(page)})
    else:
        out.line(f"passport written: {target} and {page}")
    return 0
