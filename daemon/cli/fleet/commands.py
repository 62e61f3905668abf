"""``fleetctl fleet ...``: every rig of the fleet file from one shell.

Each rig keeps its own fleetd (the authority for its hardware); these commands only read
them all at once. ``fleet status`` exits like a monitoring plugin with the worst rig's code
(critical, then unknown, then warning), so one cron line or one Nagios check watches the
whole fleet, and a rig that does not answer is a row saying so, not a failed command.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:  # imported where used: registering these commands must stay cheap
    from rich.text import Text

    from daemon.cli.fleet.file import Rig
    from daemon.cli.fleet.query import RigReading, RigSummary
    from daemon.cli.output import Output

DEFAULT_TIMEOUT_S = 5.0  # fleetquery's default, repeated here for --help without importing it

fleet_app = typer.Typer(
    no_args_is_help=True, help="Every rig of the fleet file at once.", rich_markup_mode=None
)

FleetFileOption = Annotated[
    Path | None,
    typer.Option(
        "--fleet", help="Fleet file (default ~/.config/cmpfleet/rigs.toml, or fleetctl --fleet)."
    ),
]
TimeoutOption = Annotated[
    float, typer.Option("--timeout", min=0.1, max=300, help="Seconds to wait for each rig.")
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]
OnlyOption = Annotated[
    str | None, typer.Option("--only", help="Only these cards, e.g. 0,2 or 1-3 (by index).")
]


def fleet_rigs(out: Output, ctx: typer.Context, fleet_file: Path | None) -> list[Rig]:
    """The rigs of ``--fleet`` (here or before the command), or one line and exit 3.

    Under ``--json`` stdout still gets a fleet document (``overall: unknown``, no rigs).
    """
    from daemon.cli.fleet.file import FleetFileError, load_fleet
    from daemon.cli.output import EXIT_UNKNOWN

    try:
        return load_fleet(fleet_file or getattr(ctx.obj, "fleet_file", None))
    except FleetFileError as exc:
        if out.json_mode:
            out.emit_json({"overall": "unknown", "error": str(exc), "rigs": []})
        out.fail(str(exc), EXIT_UNKNOWN, document=False)


@fleet_app.command("status")
def status(
    ctx: typer.Context,
    fleet_file: FleetFileOption = None,
    timeout_s: TimeoutOption = DEFAULT_TIMEOUT_S,
    json_mode: JsonFlag = False,
) -> None:
    """One row per rig (exit: the worst rig's 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN)."""
    from daemon.cli.fleet.query import OVERALL_EXIT, RigSummary, poll_fleet, worst
    from daemon.cli.output import EXIT_UNKNOWN

    out = _output(ctx, json_mode)
    rigs = fleet_rigs(out, ctx, fleet_file)
    readings = poll_fleet(rigs, timeout_s)
    summaries = [RigSummary.of(reading) for reading in readings]
    overall = worst([s.overall for s in summaries])
    if out.json_mode:
        out.emit_json(fleet_document(readings))
    else:
        render_fleet(out, summaries, overall)
    raise typer.Exit(OVERALL_EXIT.get(overall, EXIT_UNKNOWN))


@fleet_app.command("top")
def top(
    ctx: typer.Context,
    fleet_file: FleetFileOption = None,
    cards: Annotated[bool, typer.Option("--cards", help="One line per card, not per rig.")] = False,
    interval_s: Annotated[
        float, typer.Option("--interval", min=0.2, max=3600, help="Seconds between refreshes.")
    ] = 1.0,
    timeout_s: TimeoutOption = 2.0,
    only: OnlyOption = None,
    json_mode: JsonFlag = False,
) -> None:
    """Live view of every rig, refreshed every second; q quits (one frame when piped).

    ``--only`` picks cards in the ``--cards`` view (the same indexes on every rig).
    """
    from daemon.cli.fleet.query import poll_fleet
    from daemon.cli.fleet.top import fleet_frame
    from daemon.cli.options import only_cards
    from daemon.cli.views.live import run_live

    out = _output(ctx, json_mode)
    picked = only_cards(out, only, 2)
    rigs = fleet_rigs(out, ctx, fleet_file)
    if out.json_mode:  # one frame as data: fleet status's document (exit 0, as top's frame)
        readings = poll_fleet(rigs, timeout_s)
        out.emit_json(fleet_document(readings))
        return
    run_live(
        out.console, lambda screen: fleet_frame(rigs, timeout_s, cards, screen, picked), interval_s
    )


def _output(ctx: typer.Context, json_here: bool) -> Output:
    """The command's output, with the global ``--json`` and ``--no-color``."""
    from daemon.cli.output import Output

    json_mode = getattr(ctx.obj, "json_mode", False) or json_here
    return Output.create(json_mode, no_color=getattr(ctx.obj, "no_color", False))


def fleet_document(readings: list[RigReading]) -> dict[str, Any]:
    """``fleet status --json``: the worst overall and one entry per rig with its status."""
    from daemon.cli.fleet.query import RigSummary, worst

    summaries = [RigSummary.of(reading) for reading in readings]
    return {
        "overall": worst([s.overall for s in summaries]),
        "rigs": [
            {**_summary_json(s), "status": r.status}
            for s, r in zip(summaries, readings, strict=True)
        ],
    }


def _summary_json(summary: RigSummary) -> dict[str, Any]:
    return {
        "rig": summary.rig,
        "url": summary.url,
        "overall": summary.overall,
        "cards_ok": summary.cards_ok,
        "cards_total": summary.cards_total,
        "engine_state": summary.engine_state,
        "tokens_per_s": summary.tokens_per_s,
        "reboot_required": summary.reboot_required,
        "reboot_reason": summary.reboot_reason,
        "error": summary.error,
        "detail": summary.detail,
    }


def render_fleet(out: Output, summaries: list[RigSummary], overall: str) -> None:
    """The table, then one verdict line counting rigs per state."""
    from daemon.cli.views.listview import ListColumn

    out.table(
        None,
        [
            ListColumn("rig", 0),
            ListColumn("overall", 1),
            ListColumn("cards", 2, right=True),
            ListColumn("engine", 3),
            ListColumn("tokens/s", 5, right=True),
            ListColumn("reboot", 4),
            ListColumn("detail", flex=True),
        ],
        [summary_row(s) for s in summaries],
    )
    counts = dict.fromkeys(("critical", "unknown", "warning", "ok"), 0)
    for summary in summaries:
        counts[summary.overall] = counts.get(summary.overall, 0) + 1
    tally = ", ".join(f"{n} {state}" for state, n in counts.items() if n)
    out.line(f"fleet: {overall.upper()} ({len(summaries)} rigs: {tally})")


def summary_row(summary: RigSummary) -> list[str | Text]:
    """One rig's cells; a rig with no answer shows dashes and the reason."""
    from rich.text import Text

    from daemon.cli.output import severity_cell

    if summary.error is not None:
        return [summary.rig, severity_cell("unknown"), "-", "-", "-", "-", summary.error]
    cards = f"{summary.cards_ok}/{summary.cards_total}"
    rate = "n/a" if summary.tokens_per_s is None else f"{summary.tokens_per_s:.1f}"
    reboot = "YES" if summary.reboot_required else "no"
    return [
        summary.rig,
        severity_cell(summary.overall),
        cards,
        summary.engine_state or "n/a",
        rate,
        Text(reboot, style="bold red" if summary.reboot_required else ""),
        summary.detail,
    ]
