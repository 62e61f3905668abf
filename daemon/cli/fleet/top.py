"""What ``fleetctl fleet top`` draws: one line per rig, or one per card with ``--cards``.

The card cells are ``fleetctl top``'s (``rigview.card_cells``), led by the rig's name, so
a card reads the same in both views and ``grep rig2`` finds every card of that rig. Lines
fit the terminal like ``top``'s: columns are kept in rank order, and the ``detail`` of a
rig takes the rest of the line, shortened between words (``…``), so every rig stays on
one line at 80 columns. Into a pipe every column is there, unshortened.

A frame is built from one concurrent poll of the fleet (``fleetquery``), so a rig that is
down or restarting is a line saying so and the view carries on; it comes back on its own
at the next refresh.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

from daemon.cli.fleet.file import Rig
from daemon.cli.fleet.query import RigReading, RigSummary, poll_fleet, worst
from daemon.cli.views.rigview import (
    CARD_COLUMNS,
    Screen,
    card_cells,
    fmt,
    unlock_verdicts,
)
from daemon.cli.views.screen import (
    GAP,
    SEVERITY_STYLE,
    Column,
    Line,
    Piece,
    flow,
    table_lines,
    wrap,
)

RIG_COLUMNS = (
    Column("rig", 0),
    Column("overall", 1),
    Column("cards", 2, right=True),
    Column("engine", 3),
    Column("reboot", 4),
    Column("tokens/s", 5, right=True),
    Column("power", 6, right=True),
    Column("max temp", 7, right=True),
    Column("brake", 8),
    Column("xid", 9, right=True),
)
MIN_DETAIL = 12  # narrower than this, the detail column is left out


def fleet_frame(
    rigs: list[Rig],
    timeout_s: float,
    per_card: bool,
    screen: Screen | None = None,
    only: Collection[int] | None = None,
) -> list[Line]:
    """Poll every rig now and draw the fleet."""
    screen = screen or Screen()
    readings = poll_fleet(rigs, timeout_s)
    summaries = [RigSummary.of(reading) for reading in readings]
    overall = worst([s.overall for s in summaries])
    now = datetime.now(UTC).astimezone().strftime("%H:%M:%S")
    title = [
        Piece(f"fleet {overall.upper()}", SEVERITY_STYLE.get(overall, "")),
        Piece("cmpfleet fleet top", "bold"),
        Piece(f"{len(rigs)} rigs"),
        Piece(now),
        Piece("(q quits)", "dim"),
    ]
    lines = flow(title, screen.width, 2)
    if per_card:
        return lines + card_lines(readings, summaries, screen.width, only)
    return lines + rig_lines(readings, summaries, screen.width)


def _rig_cells(reading: RigReading, summary: RigSummary) -> list[Piece]:
    """One rig's cells: its verdict, engine and the sums over its cards."""
    state = Piece(summary.overall, SEVERITY_STYLE.get(summary.overall, ""))
    if reading.status is None:
        return [Piece(summary.rig), state, *[Piece("-")] * (len(RIG_COLUMNS) - 2)]
    cards: list[dict[str, Any]] = reading.status.get("cards") or []
    draws = [c["power_draw_w"] for c in cards if c.get("power_draw_w") is not None]
    temps = [c["temperature_c"] for c in cards if c.get("temperature_c") is not None]
    braking = sum(1 for c in cards if c.get("power_brake_active"))
    rate = summary.tokens_per_s
    return [
        Piece(summary.rig),
        state,
        Piece(f"{summary.cards_ok}/{summary.cards_total}"),
        Piece(summary.engine_state or "n/a"),
        Piece("YES", "bold red") if summary.reboot_required else Piece("no"),
        Piece("n/a" if rate is None else f"{rate:.1f}"),
        Piece(fmt(float(sum(draws)), " W") if draws else "n/a"),
        Piece(fmt(float(max(temps)), " C") if temps else "n/a"),
        Piece(f"{braking} ACTIVE", "bold red") if braking else Piece("off"),
        Piece(str(sum(int(c.get("xid_since_boot") or 0) for c in cards))),
    ]


def rig_lines(
    readings: list[RigReading], summaries: list[RigSummary], width: int | None
) -> list[Line]:
    """One line per rig; ``detail`` (why it is not OK) fills what the columns leave."""
    rows = [_rig_cells(r, s) for r, s in zip(readings, summaries, strict=True)]
    lines = table_lines(RIG_COLUMNS, rows, width)
    widest = max(len(line) for line in lines)
    room = None if width is None else width - widest - GAP
    if room is not None and room < MIN_DETAIL:
        return lines
    for line, summary in zip(lines, [None, *summaries], strict=True):
        text = "detail" if summary is None else summary.detail
        if not text:
            continue
        line.add(" " * (widest - len(line) + GAP))
        for piece in wrap([Piece(text)], room, 0, max_lines=1)[0].pieces:
            line.add(piece.text, "bold" if summary is None else piece.style)
    return lines


def card_lines(
    readings: list[RigReading],
    summaries: list[RigSummary],
    width: int | None,
    only: Collection[int] | None = None,
) -> list[Line]:
    """One line per card, each led by its rig; a rig without an answer is one line."""
    columns = (Column("rig", 0), *(Column(c.name, c.rank + 1, c.right) for c in CARD_COLUMNS))
    rows: list[list[Piece]] = []
    missing: list[Line] = []
    for reading, summary in zip(readings, summaries, strict=True):
        status = reading.status or {}
        cards = [
            c for c in status.get("cards") or [] if only is None or int(c.get("index", -1)) in only
        ]
        if not cards:
            why = summary.error or "no card readings"
            gone = [Piece(summary.rig), Piece(f"unknown: {why}", SEVERITY_STYLE["unknown"])]
            missing += wrap(gone, width, 4, max_lines=2)
            continue
        verdicts = unlock_verdicts(status.get("checks") or [])
        for card in cards:
            cells = card_cells(card, verdicts.get(int(card.get("index", -1))))
            rows.append([Piece(summary.rig), *cells])
    return [*(table_lines(columns, rows, width) if rows else []), *missing]
