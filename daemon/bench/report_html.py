"""The confirmation report as one self-contained HTML file: inline CSS, inline SVG charts.

No script, no font, no image from anywhere: the file opens the same offline, on a forum's
attachment viewer, or years later. Every value is HTML-escaped (a recipe's model path or a
label could hold markup).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from daemon.bench.charts import line_chart

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:60em;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.85em}
.ok{color:#070}.warning,.warn{color:#a60}.critical,.fail{color:#b00}
.verdict{font-weight:bold;margin:.5em 0}svg{margin:.5em 1em .5em 0}
"""


def _e(value: Any) -> str:
    return html.escape("-" if value is None else str(value))


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    head = "".join(
        f'<th class="{"l" if i < left else ""}">{_e(h)}</th>' for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(f'<td class="{"l" if i < left else ""}">{_e(v)}</td>' for i, v in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    try:
        return f"{float(value):,.{digits}f}"
    except (TypeError, ValueError):
        return str(value)


def _hardware(document: dict[str, Any]) -> str:
    hardware = document.get("hardware") or {}
    cards = hardware.get("cards") or []
    rows: list[list[Any]] = [
        [
            c.get("index"),
            c.get("name"),
            c.get("pci_bus_id"),
            c.get("memory_total_mib"),
            c.get("vbios_version"),
            c.get("power_limit_w"),
            "yes" if c.get("power_brake_active") else "no",
            f"Gen{c.get('pcie_gen')} x{c.get('pcie_width')}",
            c.get("state"),
        ]
        for c in cards
    ]
    unlocked = hardware.get("unlocked")
    host = hardware.get("host") or {}
    read = host.get("facts") or {}
    facts: list[list[Any]] = [
        ["driver", hardware.get("driver_version")],
        ["unlocked (all cards > 60 GB)", "yes" if unlocked else "no" if unlocked is False else "-"],
        ["kernel", read.get("running_kernel")],
        ["kernel command line", read.get("cmdline")],
    ]
    return (
        "<h2>Hardware</h2>"
        + _table(
            ["card", "name", "PCI", "MiB", "VBIOS", "cap W", "brake", "link", "state"], rows, 3
        )
        + _table(["fact", "value"], facts, 2)
    )


def _recipe(document: dict[str, Any]) -> str:
    recipe = document.get("recipe") or {}
    build = document.get("build") or {}
    spec = recipe.get("spec") or {}
    rows: list[list[Any]] = [
        ["profile", recipe.get("profile")],
        ["recipe hash", spec.get("recipe_hash")],
        ["build", build.get("name")],
        ["image", build.get("image")],
        ["image digest", build.get("image_digest")],
        ["engine version", build.get("engine_version")],
        ["labels", json.dumps(build.get("labels") or {})],
        ["provenance", build.get("provenance_output")],
    ]
    return (
        "<h2>Recipe (masked) and build</h2>"
        + _table(["", ""], rows, 2)
        + f"<pre>{_e(recipe.get('text'))}</pre>"
    )


def _canaries(document: dict[str, Any]) -> str:
    rows = [
        [c.get("name"), c.get("result"), c.get("figure"), c.get("ts")]
        for c in document.get("canaries") or []
    ]
    memtest = document.get("memtest") or {}
    mem_rows = [
        [
            address,
            v.get("card"),
            v.get("outcome"),
            v.get("bit_errors"),
            v.get("tested_mib"),
            v.get("ts"),
        ]
        for address, v in sorted(memtest.items())
    ]
    return (
        "<h2>Canaries (last verdicts)</h2>"
        + _table(["canary", "result", "figure", "when"], rows, 2)
        + "<h2>Memory test per card</h2>"
        + (
            _table(["PCI", "card", "outcome", "bit errors", "MiB", "when"], mem_rows, 3)
            if mem_rows
            else "<p>No memory test run yet (fleetctl diag memtest).</p>"
        )
    )


def _method_table(method: dict[str, Any]) -> str:
    axes = method.get("axes") or {}
    sampling = method.get("sampling") or {}
    engine = method.get("engine") or {}
    rows: list[list[Any]] = [
        ["concurrency", json.dumps(axes.get("concurrency"))],
        ["depth (tokens)", json.dumps(axes.get("depth_tokens"))],
        ["temperature", json.dumps(axes.get("temperature"))],
        ["output", f"{axes.get('output_tokens')} tokens, ignore_eos {sampling.get('ignore_eos')}"],
        ["unique prefixes", sampling.get("unique_prefixes")],
        ["speculative", json.dumps(method.get("speculative"))],
        [
            "engine",
            f"max-num-seqs {engine.get('max_num_seqs')}, max_model_len {engine.get('max_model_len')}",
        ],
        ["caps in force (W)", json.dumps(method.get("caps_w"))],
        ["brake", method.get("brake")],
        ["reference source", (method.get("reference") or {}).get("source")],
        *[["note", note] for note in method.get("notes") or []],
        *[["warning", warning] for warning in method.get("warnings") or []],
    ]
    return _table(["method", ""], rows, 2)


def _run_section(run: dict[str, Any]) -> str:
    method = run.get("method") or {}
    cells = run.get("cells") or []
    rows = [
        [
            c.get("key"),
            _fmt(c.get("decode_tok_s_per_stream")),
            _fmt(c.get("decode_tok_s_total")),
            _fmt(c.get("prefill_tok_s"), 0),
            _fmt(c.get("ttft_s"), 2),
            f"{_fmt(c.get('itl_p50_ms'), 0)}/{_fmt(c.get('itl_p95_ms'), 0)}",
            _fmt(c.get("spec_acceptance"), 2),
            _fmt(c.get("tokens_per_joule"), 2),
        ]
        for c in cells
    ]
    verdict = (run.get("verdict") or {}).get("text")
    parts = [
        f"<h3>Run {_e(run.get('id'))} ({_e(run.get('kind'))}, {_e(run.get('state'))}): "
        f"{_e((method.get('build') or {}).get('name'))}</h3>",
        f'<p class="verdict">{_e(verdict)}</p>',
        _method_table(method),
        _table(
            ["cell", "tok/s", "total", "prefill", "TTFT s", "ITL p50/95 ms", "acc", "tok/J"], rows
        ),
        _plots(run),
    ]
    return "".join(parts)


def _plots(run: dict[str, Any]) -> str:
    reference = (run.get("method") or {}).get("reference") or {}
    cells = run.get("cells") or []
    charts: list[str] = []
    by_conc = sorted(
        (c["concurrency"], c["decode_tok_s_total"])
        for c in cells
        if c.get("decode_tok_s_total") is not None
        and c.get("temperature") == 0
        and c.get("depth_tokens") == min(x.get("depth_tokens", 0) for x in cells)
    )
    if by_conc:
        ref = []
        if reference.get("concurrent_total_tok_s") and reference.get("concurrency"):
            ref = [
                (1, reference.get("decode_tok_s")),
                (reference["concurrency"], reference["concurrent_total_tok_s"]),
            ]
        charts.append(line_chart("total tok/s vs concurrency", by_conc, ref, "streams", "tok/s"))
    by_depth = sorted(
        (c["depth_tokens"], c["decode_tok_s_per_stream"])
        for c in cells
        if c.get("concurrency") == 1
        and c.get("temperature") == 0
        and c.get("decode_tok_s_per_stream")
    )
    if by_depth:
        ref = []
        if reference.get("decode_tok_s"):
            ref = [(by_depth[0][0], reference["decode_tok_s"])]
            if reference.get("decode_tok_s_at_1m"):
                ref.append((1_000_000, reference["decode_tok_s_at_1m"]))
        charts.append(line_chart("decode tok/s vs depth", by_depth, ref, "tokens", "tok/s"))
    steps = ((run.get("sweep") or {}).get("steps")) or []
    by_cap = [(s["cap_w"], s["tokens_per_joule"]) for s in steps if s.get("tokens_per_joule")]
    if by_cap:
        charts.append(line_chart("tok/J vs cap", by_cap, [], "W", "tok/J"))
    return "".join(charts)


def render_report(document: dict[str, Any]) -> str:
    """The report's HTML (one file, nothing loaded from anywhere)."""
    runs = document.get("bench") or []
    bench = (
        "".join(_run_section(run) for run in runs) or "<p>No bench run yet (fleetctl bench).</p>"
    )
    host = document.get("hostname")
    title = "cmpfleet confirmation report" + (f": {host}" if host else "")
    overall = document.get("overall")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{_e(title)}</h1>"
        f"<p>Generated {_e(document.get('generated_at'))} by cmpfleet "
        f"{_e(document.get('cmpfleet_version'))}; rig verdict "
        f'<span class="{_e(overall)}">{_e(overall)}</span>'
        f"{' (simulated rig)' if document.get('simulated') else ''}.</p>"
        + _hardware(document)
        + _recipe(document)
        + _canaries(document)
        + "<h2>Bench</h2>"
        + bench
        + "</body></html>\n"
    )
