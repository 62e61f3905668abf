"""The typer commands of the bench and the report (registered by ``daemon.cli.app``).

Each command imports its implementation in its body, as every fleetctl command does, so
``fleetctl status`` does not pay for the bench's imports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from daemon.cli.app_options import HELP_MARKUP, JsonFlag
from daemon.cli.options import GlobalOptions

bench_app = typer.Typer(
    help="Benchmark the engine in service: the matrix, or a power-cap sweep.",
    rich_markup_mode=HELP_MARKUP,
)


@bench_app.callback(invoke_without_command=True)
def bench(
    ctx: typer.Context,
    quick: Annotated[
        bool, typer.Option("--quick", help="A small matrix for a first look (under a minute).")
    ] = False,
    cap_sweep: Annotated[
        str | None,
        typer.Option(
            "--cap-sweep",
            metavar="LO:HI:STEP",
            help="Sweep every card's power cap (watts), measure tok/s and tok/J at each, "
            "recommend one; the caps are put back after.",
        ),
    ] = None,
    concurrency: Annotated[
        str | None, typer.Option("--concurrency", help="Streams, e.g. 1,8,64 (the default).")
    ] = None,
    depths: Annotated[
        str | None, typer.Option("--depths", help="Prompt depths, e.g. 1k,32k,100k (the default).")
    ] = None,
    temperatures: Annotated[
        str | None, typer.Option("--temperatures", help="Sampling temperatures (default 0,1).")
    ] = None,
    output_tokens: Annotated[
        int | None,
        typer.Option("--output-tokens", min=2, max=4096, help="Tokens each stream generates."),
    ] = None,
    json_mode: JsonFlag = False,
) -> None:
    """Run the bench matrix against the engine in service (exit 0 done, 4 refused, 130 Ctrl-C)."""
    from daemon.cli.engine import bench as cmd_bench

    if ctx.invoked_subcommand is not None:
        return
    opts: GlobalOptions = ctx.find_root().obj
    out = opts.output(json_mode)
    args = cmd_bench.BenchArgs(quick, cap_sweep, concurrency, depths, temperatures, output_tokens)
    raise typer.Exit(cmd_bench.run(out, opts.client(out), args))


@bench_app.command("show")
def bench_show(
    ctx: typer.Context,
    run_id: Annotated[int | None, typer.Argument(help="The run (default: the newest).")] = None,
    json_mode: JsonFlag = False,
) -> None:
    """A bench run's method, cells and verdict, in 80 columns."""
    from daemon.cli.engine import bench as cmd_bench

    opts: GlobalOptions = ctx.find_root().obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_bench.show(out, opts.client(out), run_id))


@bench_app.command("list")
def bench_list(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", min=1, max=500)] = 50,
    json_mode: JsonFlag = False,
) -> None:
    """The bench runs, per build, newest first."""
    from daemon.cli.engine import bench as cmd_bench

    opts: GlobalOptions = ctx.find_root().obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_bench.listing(out, opts.client(out), limit))


def report(
    ctx: typer.Context,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", help="Write the HTML report here (default: cmpfleet-report.html)."
        ),
    ] = None,
    with_hostname: Annotated[
        bool, typer.Option("--with-hostname", help="Name this host in the report.")
    ] = False,
    json_mode: JsonFlag = False,
) -> None:
    """A confirmation report to share: one self-contained HTML file (or --json)."""
    from daemon.cli.engine import report as cmd_report

    opts: GlobalOptions = ctx.find_root().obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_report.run(out, opts.client(out), output, with_hostname))


def register(app: typer.Typer) -> None:
    """Add ``bench`` and ``report`` to ``app``."""
    app.add_typer(bench_app, name="bench")
    app.command("report")(report)
