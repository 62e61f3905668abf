"""A card's passport as a short self-contained HTML page: what ``fleetctl card export`` writes.

Apart from ``daemon.rig.passport`` so fleetctl renders it without importing the store.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any


def passport_html(document: dict[str, Any]) -> str:
    """A short self-contained HTML page of a passport (for a sale or an RMA): no host names."""
    e = html.escape
    now = document.get("now") or {}
    rows = "".join(
        f"<tr><th>{e(str(k))}</th><td>{e(str(v))}</td></tr>"
        for k, v in (
            ("serial", document.get("serial")),
            ("UUID", document.get("uuid")),
            ("name", document.get("name")),
            ("board", now.get("board_id")),
            ("VBIOS", now.get("vbios_version")),
            ("memory", f"{now.get('memory_total_mib')} MiB ({now.get('unlock')})"),
            (
                "power range",
                f"{now.get('power_min_limit_w')}-{now.get('power_max_limit_w')} W "
                f"(default {now.get('power_default_limit_w')} W, cap {now.get('power_limit_w')} W)",
            ),
            ("link", f"{now.get('pcie')} (max {now.get('pcie_max')})"),
            ("first seen", document.get("first_seen")),
            ("last seen", document.get("last_seen")),
        )
    )

    def table(title: str, items: list[dict[str, Any]], keys: Sequence[str]) -> str:
        if not items:
            return f"<h2>{e(title)}</h2><p>none</p>"
        head = "".join(f"<th>{e(k)}</th>" for k in keys)
        body = "".join(
            "<tr>" + "".join(f"<td>{e(str(item.get(k, '')))}</td>" for k in keys) + "</tr>"
            for item in items
        )
        return f"<h2>{e(title)}</h2><table><tr>{head}</tr>{body}</table>"

    oos = document.get("out_of_service")
    mark = f"<p><b>Out of service:</b> {e(str(oos.get('reason')))}</p>" if oos else ""
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>CMP 170HX passport "
        f"{e(str(document.get('serial') or document.get('uuid')))}</title>"
        "<style>body{font:14px sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}</style></head><body>"
        f"<h1>Card passport</h1>{mark}<table>{rows}</table>"
        + table("Slots", document.get("slots") or [], ("since", "pci_bus_id", "index"))
        + table("Diagnostics", document.get("diags") or [], ("ts", "kind", "outcome", "verdict"))
        + table("Xid errors", document.get("xids") or [], ("ts", "xid", "message"))
        + table("Crashes", document.get("crashes") or [], ("ts", "crash_class", "verdict"))
        + table(
            "Bench (caps and tok/W)",
            document.get("bench") or [],
            ("ts", "kind", "cap_w", "decode_tok_s_total", "tok_per_w", "card_draw_w"),
        )
        + "<p>Written by cmpfleet.</p></body></html>\n"
    )


def bench_line(entry: Mapping[str, Any]) -> str:
    """One run for a terminal: ``2026-12-06T09:00:00 sweep run 4: 150 W (recommended) ...``."""

    def figure(value: Any, unit: str, spec: str = ",.1f") -> str:
        return "-" if value is None else f"{format(float(value), spec)} {unit}"

    cap = figure(entry.get("cap_w"), "W", "g")
    if entry.get("kind") == "sweep":
        cap += " (recommended)" if entry.get("recommended_cap_w") is not None else " (no step)"
    return (
        f"{entry.get('ts')} {entry.get('kind')} run {entry.get('run_id')}: cap {cap}, "
        f"rig {figure(entry.get('decode_tok_s_total'), 'tok/s')}, "
        f"{figure(entry.get('tok_per_w'), 'tok/W', '.2f')}, "
        f"this card drew {figure(entry.get('card_draw_w'), 'W', '.0f')}"
    )
