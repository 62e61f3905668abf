"""What ``fleetctl top`` draws for one rig: its status document as lines that fit the screen.

``rig_view(doc, source, screen)`` is pure (a document in, ``Line``s out) so any live view
can reuse it. The verdict leads the first line, then the latch, every card, the engine
and the failing checks (``daemon.cli.views.rigview``); below them, while there is room, the
canaries, the last recovery decisions and how fresh the poll is. It reads only the
status document's keys and treats every extra block as optional, so a newer or older
daemon still draws.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from daemon.cli.rig.canary import RESULT_STYLE, figure_text
from daemon.cli.views.rigview import Screen, age_text, clock_text, rig_body
from daemon.cli.views.screen import SEVERITY_STYLE, Line, Piece, flow, wrap

MAX_DECISIONS = 3


@dataclass(frozen=True)
class ViewSource:
    """Where the picture comes from and whether it is live (for the header)."""

    url: str
    error: str | None = None  # the last refresh failed: the picture below is the last seen
    seen_at: datetime | None = None  # when the picture below was fetched


def header(
    doc: dict[str, Any] | None, source: ViewSource, screen: Screen, now: datetime
) -> list[Line]:
    """The verdict first, then title, URL, clock; "reconnecting" while fleetd is away."""
    overall = str((doc or {}).get("overall", "unknown"))
    words = [
        Piece(overall.upper(), SEVERITY_STYLE.get(overall, "")),
        Piece("cmpfleet top", "bold"),
        Piece(source.url.removeprefix("http://")),
        Piece(now.astimezone().strftime("%H:%M:%S")),
    ]
    daemon = (doc or {}).get("daemon") or {}
    if daemon.get("pid") is not None:
        words.append(Piece(f"fleetd pid {daemon['pid']}"))
    words.append(Piece("(p processes, q quits)", "dim"))
    lines = flow(words, screen.width, 2)
    if source.error is not None:
        seen = "never" if source.seen_at is None else age_text(source.seen_at.isoformat(), now)
        reconnecting = Piece(
            f"reconnecting: {source.error} (last answer {seen} ago)", "bold magenta"
        )
        lines += wrap([reconnecting], screen.width, 2, None if screen.height is None else 2)
    return lines


def canaries_lines(
    canaries: list[dict[str, Any]],
    signatures: list[dict[str, Any]],
    width: int | None,
    now: datetime,
) -> list[Line]:
    """One line of canary verdicts; each warning or failure's figure and advice below it.

    The engine log signatures seen this hour follow on one line when there are any.
    """
    verdicts = [Piece("canaries:", "bold")]
    details: list[Line] = []
    for canary in canaries:
        result = str(canary.get("result", "skipped"))
        shown = result.upper() if result in ("warn", "fail") else result
        verdicts.append(Piece(f"{canary.get('name', '?')} {shown}", RESULT_STYLE.get(result, "")))
        if result in ("warn", "fail"):
            text = (
                f"{canary.get('name', '?')} {figure_text(canary)}"
                f" ({age_text(canary.get('ts'), now)} ago): {canary.get('advice') or ''}"
            )
            details += wrap([Piece(text, RESULT_STYLE[result])], width, 4, lead=2)
    lines = [*flow(verdicts, width), *details]
    seen = [s for s in signatures if s.get("this_hour")]
    if seen:
        counts = "  ".join(f"{s.get('name')} {s.get('this_hour')}" for s in seen)
        lines += wrap([Piece(f"engine log this hour: {counts}", "yellow")], width, 4)
    return lines


def decision_lines(recovery: dict[str, Any], width: int | None) -> list[Line]:
    """The newest recovery decisions, one line each, and the last bring-up."""
    lines: list[Line] = []
    for decision in (recovery.get("decisions") or [])[:MAX_DECISIONS]:
        mark = " (dry run)" if decision.get("dry_run") else ""
        text = (
            f"{clock_text(decision.get('ts'))} {decision.get('action', '?')} -> "
            f"{decision.get('outcome', '?')}{mark}: {decision.get('reason') or ''}"
        )
        lines += wrap([Piece(text, "dim")], width, 4, max_lines=1)
    bring_up = recovery.get("bring_up")
    if isinstance(bring_up, dict) and bring_up.get("summary"):
        lines += wrap([Piece(f"last bring-up: {bring_up['summary']}", "dim")], width, 4, 1)
    return lines


def footer_lines(rig: dict[str, Any], width: int | None, version: str | None = None) -> list[Line]:
    """How fresh the picture is (and which fleetd drew it)."""
    if not rig:
        return []
    age_s = rig.get("last_poll_age_s")
    last = "n/a" if age_s is None else f"{age_s:.1f} s ago"
    facts = [
        f"polls {rig.get('polls', 'n/a')}",
        f"last poll {last}",
        f"kernel records lost {rig.get('kernel_records_lost', 0)}",
    ]
    if version:
        facts.append(f"fleetd {version}")
    return flow([Piece(fact, "dim") for fact in facts], width)


def rig_view(
    doc: dict[str, Any] | None,
    source: ViewSource,
    now: datetime | None = None,
    screen: Screen | None = None,
    only: Collection[int] | None = None,
    processes: bool = False,
) -> list[Line]:
    """One rig's whole picture, the optional parts only while they fit ``screen``.

    ``processes``: each card's compute processes on the lines under it (``p`` in ``top``).
    """
    now = now or datetime.now(UTC)
    screen = screen or Screen()
    lines = header(doc, source, screen, now)
    if doc is None:
        return lines
    lines += rig_body(doc, screen, now, only, used=len(lines), processes=processes)
    extras = []
    if doc.get("canaries"):  # an older daemon has none
        extras.append(
            canaries_lines(doc["canaries"], doc.get("log_signatures") or [], screen.width, now)
        )
    extras.append(decision_lines(doc.get("recovery") or {}, screen.width))
    version = (doc.get("daemon") or {}).get("version")
    extras.append(footer_lines(doc.get("rig") or {}, screen.width, version))
    for extra in extras:
        if screen.height is None or len(lines) + len(extra) <= screen.height:
            lines += extra
    return lines
