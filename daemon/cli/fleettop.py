"""What ``fleetctl fleet top`` draws: one line per rig, or one per card with ``--cards``.

The card cells are ``fleetctl top``'s (``topview.card_cells``), led by the rig's name, so a
card reads the same in both views and ``grep rig2`` finds every card of that rig.

A frame is built from one concurrent poll of the fleet (``fleetquery``), so a rig that is
down or restarting is a line saying so and the view carries on; it comes back on its own
at the next refresh.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from daemon.cli.fleetfile import Rig
from daemon.cli.fleetquery import RigReading, RigSummary, poll_fleet, worst
from daemon.cli.output import SEVERITY_STYLE, severity_cell
from daemon.cli.render import fmt
from daemon.cli.topview import CARD_COLUMNS, card_cells, unlock_verdicts

RIG_COLUMNS = (
    "rig", "overall", "cards", "engine", "tokens/s", "power", "max temp", "brake", "xid",
    "reboot", "detail",
)  # fmt: skip


def fleet_frame(rigs: list[Rig], timeout_s: float, per_card: bool) -> RenderableType:
    """Poll every rig now and draw the fleet."""
    readings = poll_fleet(rigs, timeout_s)
    summaries = [RigSummary.of(reading) for reading in readings]
    overall = worst([s.overall for s in summaries])
    now = datetime.now(UTC).astimezone().strftime("%H:%M:%S")
    title = Text.assemble(
        ("cmpfleet fleet top", "bold"),
        f"  {len(rigs)} rigs  {now}  fleet ",
        (overall.upper(), SEVERITY_STYLE.get(overall, "")),
        "  (q quits)",
    )
    table = _card_table(readings, summaries) if per_card else _rig_table(readings, summaries)
    return Group(title, table)


def _table(columns: tuple[str, ...]) -> Table:
    table = Table(show_edge=False, pad_edge=False, expand=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def _rig_table(readings: list[RigReading], summaries: list[RigSummary]) -> Table:
    table = _table(RIG_COLUMNS)
    for reading, summary in zip(readings, summaries, strict=True):
        table.add_row(*_rig_cells(reading, summary))
    return table


def _rig_cells(reading: RigReading, summary: RigSummary) -> list[str | Text]:
    """One rig's line: its verdict, engine and the sums over its cards."""
    if reading.status is None:
        dashes: list[str | Text] = ["-"] * (len(RIG_COLUMNS) - 3)
        return [summary.rig, severity_cell("unknown"), *dashes, summary.error or ""]
    cards: list[dict[str, Any]] = reading.status.get("cards") or []
    draws = [c["power_draw_w"] for c in cards if c.get("power_draw_w") is not None]
    temps = [c["temperature_c"] for c in cards if c.get("temperature_c") is not None]
    braking = sum(1 for c in cards if c.get("power_brake_active"))
    rate = summary.tokens_per_s
    return [
        summary.rig,
        severity_cell(summary.overall),
        f"{summary.cards_ok}/{summary.cards_total}",
        summary.engine_state or "n/a",
        "n/a" if rate is None else f"{rate:.1f}",
        fmt(float(sum(draws)), " W") if draws else "n/a",
        fmt(float(max(temps)), " C") if temps else "n/a",
        Text(f"{braking} ACTIVE", style="bold red") if braking else "off",
        str(sum(int(c.get("xid_since_boot") or 0) for c in cards)),
        Text("YES", style="bold red") if summary.reboot_required else "no",
        summary.detail,
    ]


def _card_table(readings: list[RigReading], summaries: list[RigSummary]) -> Table:
    """One line per card, each led by its rig; a rig without an answer is one line."""
    table = _table(("rig", *CARD_COLUMNS))
    for reading, summary in zip(readings, summaries, strict=True):
        cards = (reading.status or {}).get("cards") or []
        if not cards:
            why = summary.error or "no card readings"
            blanks: list[str | Text] = ["-"] * (len(CARD_COLUMNS) - 1)
            table.add_row(
                summary.rig, *blanks, Text(f"unknown: {why}", style=SEVERITY_STYLE["unknown"])
            )
            continue
        verdicts = unlock_verdicts((reading.status or {}).get("checks") or [])
        for card in cards:
            table.add_row(summary.rig, *card_cells(card, verdicts.get(int(card["index"]))))
    return table
