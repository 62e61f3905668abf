"""fleetctl's crash commands: ``crashes``, ``crash show ID``, ``crash export ID``.

Registered by ``daemon.cli.app``; like every command, each body imports what it uses, so
registering them loads typer only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from daemon.cli.app_options import HELP_MARKUP, JsonFlag
from daemon.cli.options import GlobalOptions

crash_app = typer.Typer(
    help="One crash bundle: its verdict and evidence, or its tarball.",
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
)

BundleId = Annotated[str, typer.Argument(help="The bundle's id (fleetctl crashes lists them).")]


def crashes(ctx: typer.Context, json_mode: JsonFlag = False) -> None:
    """The crash bundles: when, class, verdict, card and rank, depth (newest first)."""
    from daemon.cli.rig import crashes as cmd_crashes

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_crashes.list_crashes(out, opts.client(out)))


@crash_app.command("show")
def crash_show(ctx: typer.Context, bundle_id: BundleId, json_mode: JsonFlag = False) -> None:
    """One bundle's verdict and the evidence behind it (80 columns)."""
    from daemon.cli.rig import crashes as cmd_crashes

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_crashes.show(out, opts.client(out), bundle_id))


@crash_app.command("export")
def crash_export(
    ctx: typer.Context,
    bundle_id: BundleId,
    output: Annotated[Path, typer.Option("--output", "-o", help="The .tar.gz to write (0600).")],
    with_hostname: Annotated[
        bool, typer.Option("--with-hostname", help="Keep this host's name in the tarball.")
    ] = False,
    json_mode: JsonFlag = False,
) -> None:
    """Write the bundle as a tarball safe for a public issue (masked, no prompt text)."""
    from daemon.cli.rig import crashes as cmd_crashes

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_crashes.export(out, opts.client(out, 3), bundle_id, output, with_hostname))


def register(app: typer.Typer) -> None:
    """Add ``crashes`` and the ``crash`` group to ``app``."""
    app.command("crashes")(crashes)
    app.add_typer(crash_app, name="crash")
