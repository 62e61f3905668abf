"""fleetctl commands answered by a running fleetd: ``status``, ``events``, ``ack``.

``status`` puts the verdict and the reboot latch first, then one line per card, the
engine and the failing checks with their remedies (``daemon.cli.views.rigview``): fitted to a
terminal's width, unwrapped into a pipe. It imports neither rich (in a pipe) nor the
daemon's config: a monitor runs it every minute (``bench/cli_startup.py``).
"""

from __future__ import annotations

import textwrap
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_UNKNOWN, Output, severity_cell
from daemon.cli.views.listview import ListColumn, short_time
from daemon.cli.views.rigview import Screen, fmt, rig_body
from daemon.cli.views.screen import SEVERITY_STYLE, Line, Piece

OVERALL_EXIT = {"ok": 0, "warning": 1, "critical": 2, "unknown": 3}
EVENT_SEVERITIES = ("info", "warning", "critical")
EVENT_MESSAGE_LINES = 3  # on a terminal: one launch's argv took 12 lines of an 80x24 screen
# What matters first: when, how bad, which card, what kind; the id (for ``ack``) and the
# Xid where they fit (the message names the Xid too).
EVENT_COLUMNS = (
    ListColumn("id", 4, right=True),
    ListColumn("time", 0),
    ListColumn("kind", 3),
    ListColumn("severity", 1),
    ListColumn("card", 2, right=True),
    ListColumn("xid", 5, right=True),
    ListColumn("message", flex=True, max_lines=EVENT_MESSAGE_LINES),
)


def status_lines(
    doc: dict[str, Any],
    screen: Screen,
    only: Collection[int] | None = None,
    processes: bool = False,
) -> list[Line]:
    """The verdict line, then the latch, critical causes, cards, engine and the warnings.

    ``processes``: each card's compute processes under it (``status --verbose``).
    """
    overall = str(doc.get("overall", "unknown"))
    verdict = Line(Piece("overall: "), Piece(overall.upper(), SEVERITY_STYLE.get(overall, "")))
    now = datetime.now(UTC)
    return [verdict, *rig_body(doc, screen, now, only, used=1, processes=processes)]


def explanation_lines(items: list[dict[str, Any]], width: int | None) -> list[str]:
    """``explanations:``, then each fault's long text: wrapped on a terminal, whole in a pipe."""
    lines = ["explanations:"]
    for item in items:
        text = f"{item.get('fault')} ({item.get('title')}): {item.get('text')}"
        if width is None:
            lines.append(f"  {text}")
        else:
            lines.extend(
                textwrap.wrap(
                    text,
                    max(width, 40),
                    initial_indent="  ",
                    subsequent_indent="    ",
                    break_long_words=False,
                    break_on_hyphens=False,
                )
            )
    return lines


def show_lines(out: Output, lines: list[Line]) -> None:
    """Lines to stdout: coloured on a terminal, plain (rich never loaded) into a pipe."""
    if out.is_terminal:
        from daemon.cli.views.screen import to_rich

        out.console.print(to_rich(lines), soft_wrap=True)
    else:
        from daemon.cli.views.screen import plain

        out.write(plain(lines))


MIN_STATUS_ROWS = 10  # below this, fitting would hide more than a scroll does
WHY_ROWS = 2  # the "why: fleetctl explain ..." line, wrapped once on 80 columns
PROMPT_ROWS = 1  # the shell's prompt after it


def status(
    out: Output, client: FleetClient, only: Collection[int] | None = None, verbose: bool = False
) -> int:
    """``fleetctl status``: plugin exit codes; 3 when fleetd cannot be reached.

    ``verbose`` adds each fault's long explanation (the document holds it once); without
    it one line names the ``fleetctl explain`` commands that print them.
    """
    try:
        doc = client.status()
    except ClientError as exc:
        out.fail_unknown(str(exc))
    if out.json_mode:
        out.emit_json(doc)
    else:
        width = out.console.width if out.is_terminal else None
        explained = doc.get("explanations") or []
        # On a terminal (not --verbose) the picture fits its height, the "why:" line
        # included, so the verdict at the top never scrolls off an 80x24 screen.
        height = None
        if out.is_terminal and not verbose:
            below = PROMPT_ROWS + (WHY_ROWS if explained else 0)
            height = max(MIN_STATUS_ROWS, out.console.height - below)
        show_lines(out, status_lines(doc, Screen(width, height), only, processes=verbose))
        if verbose:
            for line in explanation_lines(explained, width):
                out.line(line)
        elif explained:
            faults = ", ".join(f"fleetctl explain {item['fault']}" for item in explained)
            out.line(f"why: {faults} (or status --verbose)")
    return OVERALL_EXIT.get(str(doc.get("overall")), EXIT_UNKNOWN)


@dataclass(frozen=True)
class EventFilter:
    """``fleetctl events`` options: time, kind, how many, card, severity (or worse)."""

    since: str | None = None
    kind: str | None = None
    limit: int = 50
    card: int | None = None
    severity: str | None = None


def events(out: Output, client: FleetClient, query: EventFilter) -> int:
    """``fleetctl events``: newest first."""
    if query.severity is not None and query.severity not in EVENT_SEVERITIES:
        out.fail(
            f"--severity: {query.severity!r} is not one of {', '.join(EVENT_SEVERITIES)}",
            EXIT_BAD_INPUT,
        )
    params = {
        "since": query.since,
        "kind": query.kind,
        "limit": query.limit,
        "card": query.card,
        "min_severity": query.severity,
    }
    try:
        rows = client.get("/api/v1/events", params)
    except ClientError as exc:
        out.fail(str(exc), EXIT_FAILED)
    if out.json_mode:
        out.emit_json(rows)
        return 0
    if not rows:
        out.line("no events")
        return 0
    when = short_time if out.is_terminal else str  # a pipe keeps the whole ISO time
    out.table(
        None,
        EVENT_COLUMNS,
        [
            [
                str(r["id"]),
                when(r["ts"]),
                r["kind"],
                severity_cell(r["severity"]),
                "-" if r["card"] is None else str(r["card"]),
                "-" if r["xid"] is None else str(r["xid"]),
                r["message"] + (" (acked)" if r.get("acked") else ""),
            ]
            for r in rows
        ],
    )
    return 0


def ack(out: Output, client: FleetClient, event_id: int) -> int:
    """``fleetctl ack ID``."""
    try:
        result = client.post(f"/api/v1/events/{event_id}/ack")
    except ClientError as exc:
        out.fail(str(exc), EXIT_FAILED)
    if out.json_mode:
        out.emit_json(result)
    else:
        out.line(f"event {event_id} acknowledged")
    return 0


def caps_apply(out: Output, client: FleetClient) -> int:
    """``fleetctl caps apply``: fleetd re-applies the cap now; 1 if any card failed."""
    try:
        result = client.post("/api/v1/caps/apply")
    except ClientError as exc:
        out.fail(str(exc), EXIT_FAILED)
    if out.json_mode:
        out.emit_json(result)
    else:
        out.table(
            f"Power cap {result['target_w']:.0f} W (a card's own where it has one)",
            ["card", "before", "target", "outcome", "detail"],
            [
                [
                    str(c["card"]),
                    fmt(c["before_w"], " W"),
                    fmt(c["target_w"], " W"),
                    c["outcome"],
                    c["detail"],
                ]
                for c in result["cards"]
            ],
        )
    return EXIT_FAILED if any(c["outcome"] == "failed" for c in result["cards"]) else 0
