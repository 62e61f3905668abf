"""The failing checks as causes: one line per fault naming its cards, the root first.

The status document's ``causes`` (``hwcheck.causes``: fleetd groups the checks) say a
board-level fault once (``power_brake cards 0-3: ...``) and put a root cause before what
it explains (``host_kernel`` before ``bar1``). ``status`` and ``top`` draw the critical
ones with their advice right under the verdict and the latch, where an 80x24 screen
always shows them, and the warnings after the engine. A cause that follows from another
says so and leaves its advice to the root's on a screen (its own is kept into a pipe).

Pure and free of ``hwcheck``'s model (a monitor runs ``status`` every minute: it must not
load pydantic): the document's dicts in, ``Line``s out. A daemon without ``causes`` (an
older one) gets one cause per failing check.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from daemon.cli.views.screen import SEVERITY_STYLE, Line, Piece, wrap

INDENT = 4
SEVERITY_ORDER = {"critical": 0, "warning": 1, "unknown": 2}


def _as_cause(check: dict[str, Any]) -> dict[str, Any]:
    """An older daemon's check as a cause of its own."""
    card = check.get("card")
    where = "" if card is None else f"card {card}"
    return {
        "id": check.get("id", "?"),
        "severity": check.get("severity", "unknown"),
        "cards": [] if card is None else [card],
        "where": where,
        "message": check.get("message", ""),
        "remedy": check.get("remedy", ""),
        "explained_by": None,
        "headline": f"{check.get('id', '?')}{' ' + where if where else ''}: "
        f"{check.get('message', '')}",
    }


def doc_causes(doc: dict[str, Any], only: Collection[int] | None = None) -> list[dict[str, Any]]:
    """The document's causes (rig-wide ones, and those on ``only``'s cards), worst first."""
    causes = doc.get("causes")
    if causes is None:  # an older daemon: each failing check is a cause
        failing = [c for c in doc.get("checks") or [] if c.get("severity") != "ok"]
        causes = sorted(
            (_as_cause(c) for c in failing),
            key=lambda c: SEVERITY_ORDER.get(str(c["severity"]), 3),
        )
    if only is None:
        return list(causes)
    return [c for c in causes if not c.get("cards") or set(c["cards"]) & set(only)]


def cause_lines(cause: dict[str, Any], width: int | None, brief: bool = False) -> list[Line]:
    """``critical power_brake cards 0-3: message`` and its ``fix:`` (``brief``: one line).

    A cause another explains says so after its message; on a screen its own fix gives way
    to the root's (shown above it), into a pipe it is kept.
    """
    severity = str(cause.get("severity", "unknown"))
    text = str(cause.get("headline") or f"{cause.get('id', '?')}: {cause.get('message', '')}")
    root = cause.get("explained_by")
    if root:
        text += f" (follows from {root})"
    head = [Piece(severity, SEVERITY_STYLE.get(severity, "")), Piece(text)]
    if brief:
        return wrap(head, width, INDENT, max_lines=1)
    lines = wrap(head, width, INDENT)
    remedy = cause.get("remedy")
    if remedy and (not root or width is None):
        style = "bold" if severity == "critical" else ""
        lines += wrap([Piece(f"fix: {remedy}", style)], width, INDENT, lead=INDENT)
    return lines


def causes_block(
    causes: Sequence[dict[str, Any]], width: int | None, room: int | None
) -> list[Line]:
    """The causes in at most ``room`` lines: whole, then one line each, then "+N more".

    The first causes (the worst, roots first) keep their whole text before the others
    get theirs, so a root cause's advice is the last thing to be cut.
    """
    if not causes:
        return []
    whole = [cause_lines(cause, width) for cause in causes]
    if room is None or sum(len(lines) for lines in whole) <= room:
        return [line for lines in whole for line in lines]
    if len(causes) > room:  # not even a line each: as many as fit, then how many more
        shown = max(0, room - 1)
        more = Line(Piece(f"+{len(causes) - shown} more failing (fleetctl status)", "yellow"))
        return [*(cause_lines(c, width, brief=True)[0] for c in causes[:shown]), more]
    spare = room - len(causes)  # a line each fits; the first get their whole text first
    picked: list[Line] = []
    for cause, full in zip(causes, whole, strict=True):
        if len(full) - 1 <= spare:
            picked += full
            spare -= len(full) - 1
        else:
            picked += cause_lines(cause, width, brief=True)
    return picked
