"""``fleetctl canary run`` / ``canary status``: the engine canaries through the daemon.

Exit codes: 0 every canary passed, 1 a warning (or a canary skipped: nothing verified),
2 a failure; a daemon that cannot be reached or refuses (no engine, not ready) exits 3.

Where several engines run (``[serving] run``), ``canary status`` shows one block per
engine, its name first, and exits with the worst of every engine's canaries; with one
engine it is what it always was.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.text import Text

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_UNKNOWN, Output
from daemon.cli.waiting import answer_while_waiting, show_elapsed

# A stale verdict verifies nothing about the engine serving now: 1, as skipped.
RESULT_EXIT = {"pass": 0, "warn": 1, "skipped": 1, "stale": 1, "fail": 2}
RESULT_STYLE = {
    "pass": "green",
    "warn": "yellow",
    "skipped": "magenta",
    "stale": "magenta",
    "fail": "bold red",
}
# A round is four requests, each with its own timeout (default 120 s): wait for all of them.
RUN_TIMEOUT_S = 900.0
# The deep round stops at its budget (``[canary] deep_budget_s``, at most 6 h).
DEEP_RUN_TIMEOUT_S = 6 * 3600.0 + 60.0


def exit_code(canaries: list[dict[str, Any]]) -> int:
    """The worst result's code (no results at all: 1, nothing verified)."""
    return max((RESULT_EXIT.get(str(c.get("result")), 1) for c in canaries), default=1)


def figure_text(canary: dict[str, Any]) -> str:
    """The figure in its unit (a ratio as a percentage; ``-`` when it has none)."""
    figure = canary.get("figure")
    if figure is None:
        return "-"
    unit = canary.get("unit") or ""
    if unit == "ratio":
        return f"{float(figure):.1%}"
    return f"{float(figure):g} {unit}".strip()


def depth_curve(canary: dict[str, Any]) -> str:
    """A deep canary's figure per depth: ``16k 100%, 64k 98%, 96k 15% (breaks at 96k)``."""
    details = canary.get("details") or {}
    entries = details.get("depths") if isinstance(details, dict) else None
    if not isinstance(entries, list) or not entries:
        return ""
    unit = canary.get("unit") or ""
    parts = []
    for entry in entries:
        depth = int(entry.get("depth") or 0)
        label = f"{depth / 1000:g}k" if depth >= 1000 else str(depth)
        shown = figure_text({"figure": entry.get("figure"), "unit": unit})
        parts.append(f"{label} {shown if shown != '-' else entry.get('result')}")
    breaks = details.get("breaks_at")
    where = f" (breaks at {int(breaks) / 1000:g}k)" if isinstance(breaks, int) else ""
    return ", ".join(parts) + where


def _render(out: Output, canaries: list[dict[str, Any]], signatures: list[dict[str, Any]]) -> None:
    if not canaries:
        out.line("no canary results yet")
    rows: list[list[str | Text]] = [
        [
            str(c.get("name")),
            Text(str(c.get("result")), style=RESULT_STYLE.get(str(c.get("result")), "")),
            figure_text(c),
            str(c.get("message") or ""),
            str(c.get("advice") or ""),
            str(c.get("ts") or ""),
        ]
        for c in canaries
    ]
    if rows:
        out.table(None, ["canary", "result", "figure", "message", "advice", "time"], rows)
    curves = [(str(c.get("name")), depth_curve(c)) for c in canaries]
    curves = [(name, curve) for name, curve in curves if curve]
    if curves:
        out.table(
            "by depth (tokens)", ["canary", "figure at each depth"], [list(c) for c in curves]
        )
    counted = [s for s in signatures if s.get("last_24h")]
    if counted:
        out.table(
            "engine log signatures",
            ["signature", "this hour", "last 24 h"],
            [[str(s["name"]), str(s["this_hour"]), str(s["last_24h"])] for s in counted],
        )


def run(
    out: Output, client: FleetClient, force: bool, deep: bool = False, engine: str | None = None
) -> int:
    """Run every canary now on ``engine`` (None: the primary; ``deep``: the deep round)."""
    wait_s = DEEP_RUN_TIMEOUT_S if deep else RUN_TIMEOUT_S
    client = dataclasses.replace(client, timeout_s=max(client.timeout_s, wait_s))
    body: dict[str, Any] = {"force": force, "deep": True} if deep else {"force": force}
    if engine is not None:
        body["engine"] = engine
    try:
        document: dict[str, Any] = answer_while_waiting(
            out,
            lambda: client.post("/api/v1/canary/run", body),
            lambda started_s: show_elapsed(out, started_s, "canaries running on the engine..."),
            "fleetd finishes the canary round (fleetctl canary status shows it)",
        )
    except ClientError as exc:
        out.fail(str(exc), EXIT_UNKNOWN)
    return _show(out, document)


def status(out: Output, client: FleetClient) -> int:
    """The canaries' last results and the log-signature counts."""
    try:
        document = client.get("/api/v1/canary")
    except ClientError as exc:
        out.fail(str(exc), EXIT_UNKNOWN)
    return _show(out, document)


# One engine's canaries as ``canary status`` shows them: its name (None with one engine),
# its canaries and its log-signature counts.
EngineBlock = tuple[str | None, list[dict[str, Any]], list[dict[str, Any]]]


def engine_blocks(document: dict[str, Any]) -> list[EngineBlock]:
    """Each engine's block of ``document``: one unnamed block unless several engines run."""
    engines = [e for e in document.get("engines") or [] if isinstance(e, dict)]
    if len(engines) < 2:
        canaries, signatures = document.get("canaries"), document.get("log_signatures")
        return [(None, list(canaries or []), list(signatures or []))]
    return [
        (str(e.get("engine")), list(e.get("canaries") or []), list(e.get("log_signatures") or []))
        for e in engines
    ]


def _show(out: Output, document: dict[str, Any]) -> int:
    """The document as JSON or tables; the worst exit code of every engine's canaries."""
    blocks = engine_blocks(document)
    if out.json_mode:
        out.emit_json(document)
    else:
        for name, canaries, signatures in blocks:
            if name is not None:
                out.line(f"engine {name}")
            _render(out, canaries, signatures)
    return max(exit_code(canaries) for _, canaries, _ in blocks)
