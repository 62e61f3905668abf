"""The ``fleetctl`` command tree and its global options.

``--json`` is accepted before the command (``fleetctl --json check``) or at its end
(``fleetctl check --json``); either one turns on JSON output.

Start-up cost: this module imports typer and nothing else heavy. Each command imports
what it uses in its own body (``from daemon.cli.rig import check as cmd_check`` as its
first line), so
``--help`` and ``--version`` never load httpx, rich, the config or the daemon's modules,
and ``status`` loads only the client and its renderer (``bench/cli_startup.py``;
``tests/cli/test_startup.py`` holds the line). A new command follows the same pattern.
The engine and recovery commands live in ``engine.commands``, shared option types in
``app_options``; each command group's modules in its folder (``rig``, ``engine``, ``fleet``,
``setup``), the terminal drawing in ``views``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from daemon.cli.app_options import HELP_MARKUP, JsonFlag
from daemon.cli.engine import bench_commands
from daemon.cli.engine import commands as app_engine
from daemon.cli.fleet.commands import OnlyOption, fleet_app
from daemon.cli.options import DEFAULT_URL, GlobalOptions
from daemon.cli.pipes import OutputClosed
from daemon.cli.rig import crash_commands as app_crashes
from daemon.defaults import DEFAULT_CONFIG_PATH
from web.version import __version__


class PipeSafeGroup(TyperGroup):
    """The top-level command group: a closed stdout anywhere below becomes ``OutputClosed``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """Top-level ``--help`` (and the usage shown for no arguments) is printed here."""
        try:
            return super().parse_args(ctx, args)
        except BrokenPipeError as exc:
            raise OutputClosed from exc

    def invoke(self, ctx: Any) -> Any:
        """Every command (and its own ``--help``) runs inside this call."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise OutputClosed from exc


HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}  # inherited by every subcommand

app = typer.Typer(
    cls=PipeSafeGroup,
    add_completion=False,
    no_args_is_help=True,
    help="Control and inspect a cmpfleet rig (CMP 170HX inference rig supervisor).",
    pretty_exceptions_enable=False,
    rich_markup_mode=HELP_MARKUP,
    context_settings=HELP_OPTIONS,
)
xid_app = typer.Typer(
    no_args_is_help=True, help="Kernel-log Xid tools.", rich_markup_mode=HELP_MARKUP
)
app.add_typer(xid_app, name="xid")
caps_app = typer.Typer(no_args_is_help=True, help="Power caps.", rich_markup_mode=HELP_MARKUP)
app.add_typer(caps_app, name="caps")
recipe_app = typer.Typer(no_args_is_help=True, help="Launch recipes.", rich_markup_mode=HELP_MARKUP)
app.add_typer(recipe_app, name="recipe")
canary_app = typer.Typer(
    no_args_is_help=True, help="Engine canaries (output checks).", rich_markup_mode=HELP_MARKUP
)
app.add_typer(canary_app, name="canary")
app.add_typer(fleet_app, name="fleet")
diag_app = typer.Typer(
    no_args_is_help=True, help="Diagnostics fleetd runs on the cards.", rich_markup_mode=HELP_MARKUP
)
app.add_typer(diag_app, name="diag")
alerts_app = typer.Typer(
    help="Recent alerts and their delivery; `alerts test` sends a test alert.",
    rich_markup_mode=HELP_MARKUP,
)
app.add_typer(alerts_app, name="alerts")
guard_app = typer.Typer(
    no_args_is_help=True,
    help="The traffic guard: client keys, their token use and repairs, sessions.",
    rich_markup_mode=HELP_MARKUP,
)
app.add_typer(guard_app, name="guard")


def _show_version(shown: bool) -> None:
    """``--version``: print it and stop (``daemon.fleetctl`` answers the plain case sooner)."""
    if shown:
        typer.echo(f"fleetctl {__version__}")
        raise typer.Exit(0)


@app.callback()
def main_options(
    ctx: typer.Context,
    url: Annotated[
        str, typer.Option("--url", envvar="FLEETCTL_URL", help="fleetd's URL ($FLEETCTL_URL).")
    ] = DEFAULT_URL,
    token_file: Annotated[
        Path | None, typer.Option("--token-file", help="File holding the API token.")
    ] = None,
    rig: Annotated[str | None, typer.Option("--rig", help="A rig of the fleet file.")] = None,
    fleet_file: Annotated[
        Path | None,
        typer.Option(
            "--fleet",
            envvar="FLEETCTL_FLEET",
            help="Fleet file for --rig and fleet commands ($FLEETCTL_FLEET; default "
            "~/.config/cmpfleet/rigs.toml).",
        ),
    ] = None,
    json_mode: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    no_color: Annotated[
        bool, typer.Option("--no-color", help="No colours (also when $NO_COLOR is set).")
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_show_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Control and inspect a cmpfleet rig."""
    ctx.obj = GlobalOptions(
        url=url,
        token_file=token_file,
        rig=rig,
        json_mode=json_mode,
        fleet_file=fleet_file,
        no_color=no_color,
    )


XidConfig = Annotated[Path | None, typer.Option("--config", help="fleet.toml (Xid overrides).")]


@app.command("check")
def check(
    ctx: typer.Context,
    simulate: Annotated[
        str | None, typer.Option("--simulate", help="Built-in scenario name or scenario file.")
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="fleet.toml to read.")] = None,
    no_probe: Annotated[
        bool, typer.Option("--no-probe", help="Skip the CUDA probe of each card.")
    ] = False,
    json_mode: JsonFlag = False,
) -> None:
    """One-shot local hardware check, no daemon (exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN)."""
    from daemon.cli.rig import check as cmd_check

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_check.run(out, simulate, config, daemon_url=opts.url, probe=not no_probe))


@xid_app.command("scan")
def xid_scan(
    ctx: typer.Context,
    file: Annotated[
        str, typer.Argument(help="A saved kernel log (dmesg, journalctl -k, kmsg), or - for stdin.")
    ] = "-",
    config: XidConfig = None,
    json_mode: JsonFlag = False,
) -> None:
    """List the Xid events in a saved kernel log."""
    from daemon.cli.rig import xid as cmd_xid

    opts: GlobalOptions = ctx.obj
    raise typer.Exit(cmd_xid.scan(opts.output(json_mode), file, config))


@app.command("status")
def status(
    ctx: typer.Context,
    only: OnlyOption = None,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", help="Add the long explanation of each fault, once."),
    ] = False,
    json_mode: JsonFlag = False,
) -> None:
    """Rig overview from fleetd (exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN/unreachable)."""
    from daemon.cli.options import only_cards
    from daemon.cli.rig import status as cmd_daemon

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    picked = only_cards(out, only, 3)
    raise typer.Exit(cmd_daemon.status(out, opts.client(out, 3), picked, verbose))


@app.command("explain")
def explain(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(help="xid, advice, or a check id (power_brake, bar1).")],
    key: Annotated[
        str | None,
        typer.Argument(
            help="The Xid number, or the advice (warm_reboot, cold_power_cycle, take_card_out)."
        ),
    ] = None,
    config: XidConfig = None,
    json_mode: JsonFlag = False,
) -> None:
    """The long explanation behind a fault: `explain xid 31`, `explain power_brake` (no daemon)."""
    from daemon.cli.rig import explain as cmd_explain

    opts: GlobalOptions = ctx.obj
    raise typer.Exit(cmd_explain.run(opts.output(json_mode), kind, key, config))


@app.command("top")
def top(
    ctx: typer.Context,
    interval_s: Annotated[
        float, typer.Option("--interval", min=0.2, max=3600, help="Seconds between refreshes.")
    ] = 1.0,
    only: OnlyOption = None,
    json_mode: JsonFlag = False,
) -> None:
    """Live full-screen view of the rig (q quits; one frame when stdout is not a terminal)."""
    from daemon.cli.options import only_cards
    from daemon.cli.rig import top as cmd_top

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    picked = only_cards(out, only, 3)
    raise typer.Exit(cmd_top.top(out, opts.client(out, 3), interval_s, picked))


@app.command("events")
def events(
    ctx: typer.Context,
    since: Annotated[str | None, typer.Option("--since", help="ISO 8601 time.")] = None,
    kind: Annotated[str | None, typer.Option("--kind", help="xid, check, serving, ...")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10000)] = 50,
    card: Annotated[int | None, typer.Option("--card", min=0, help="Only this card.")] = None,
    severity: Annotated[
        str | None,
        typer.Option("--severity", help="info, warning or critical: this severity or worse."),
    ] = None,
    json_mode: JsonFlag = False,
) -> None:
    """Events recorded by fleetd, newest first."""
    from daemon.cli.rig import status as cmd_daemon

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    query = cmd_daemon.EventFilter(since, kind, limit, card, severity)
    raise typer.Exit(cmd_daemon.events(out, opts.client(out), query))


@app.command("ack")
def ack(ctx: typer.Context, event_id: int, json_mode: JsonFlag = False) -> None:
    """Acknowledge one event."""
    from daemon.cli.rig import status as cmd_daemon

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_daemon.ack(out, opts.client(out), event_id))


@app.command("init")
def init(
    ctx: typer.Context,
    output: Annotated[
        Path, typer.Option("--output", help="Config file to write.")
    ] = DEFAULT_CONFIG_PATH,
    simulate: Annotated[
        str | None, typer.Option("--simulate", help="Detect a simulated rig instead.")
    ] = None,
    power_cap_w: Annotated[
        float | None,
        typer.Option(
            "--power-cap-w",
            min=50,
            max=400,
            help="Cap to enforce (default: the config's own, else 180).",
        ),
    ] = None,
    card_power_cap_w: Annotated[
        list[str] | None,
        typer.Option(
            "--card-power-cap-w",
            help="A card's own cap, CARD=WATTS (index, run 0-3 or PCI address); repeatable.",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Write the baseline keys into an existing config (all else kept)."
        ),
    ] = False,
    show: Annotated[
        bool, typer.Option("--show", help="Print the host baseline in force; write nothing.")
    ] = False,
    config: Annotated[Path | None, typer.Option("--config", help="fleet.toml to read.")] = None,
    json_mode: JsonFlag = False,
) -> None:
    """Detect the cards and record today's baseline in the config (--show: print the host's)."""
    from daemon.cli.rig.host_judging import local_state_dir
    from daemon.cli.setup import host_baseline
    from daemon.cli.setup import init as cmd_init

    opts: GlobalOptions = ctx.obj
    if show:
        out = opts.output(json_mode)
        raise typer.Exit(host_baseline.show(out, config, simulate, local_state_dir()))
    out = opts.output(json_mode)
    caps = card_power_cap_w or []
    raise typer.Exit(cmd_init.run(out, output, simulate, power_cap_w, force, caps))


@caps_app.command("apply")
def caps_apply(ctx: typer.Context, json_mode: JsonFlag = False) -> None:
    """Have fleetd re-apply the configured power cap to every card off it (resets at boot)."""
    from daemon.cli.rig import status as cmd_daemon

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_daemon.caps_apply(out, opts.client(out)))


app_engine.register(app)
app_crashes.register(app)
bench_commands.register(app)


RecipeFile = Annotated[
    Path | None, typer.Argument(help="Recipe TOML (default: the configured recipe).")
]
CheckpointOrRecipe = Annotated[
    Path | None,
    typer.Argument(
        metavar="[DIR|FILE]",
        help="The checkpoint's directory, or a recipe TOML naming it (default: the configured recipe).",
    ),
]
ProfileOption = Annotated[
    str | None,
    typer.Option(
        "--profile", help="A profile of the config ([serving.profiles.NAME]), not a FILE."
    ),
]


@recipe_app.command("lint")
def recipe_lint(
    ctx: typer.Context,
    file: RecipeFile = None,
    profile: ProfileOption = None,
    config: Annotated[Path | None, typer.Option("--config", help="fleet.toml to read.")] = None,
    json_mode: JsonFlag = False,
) -> None:
    """Validate a launch recipe or a configured profile (exit 0 clean, 1 warnings, 2 errors)."""
    from daemon.cli.engine import recipe as cmd_recipe

    opts: GlobalOptions = ctx.obj
    raise typer.Exit(cmd_recipe.lint(opts.output(json_mode), file, config, profile))


@recipe_app.command("show")
def recipe_show(
    ctx: typer.Context,
    file: RecipeFile = None,
    diff: Annotated[
        bool, typer.Option("--diff", help="Diff against the last ready launch.")
    ] = False,
    profile: ProfileOption = None,
    config: Annotated[Path | None, typer.Option("--config", help="fleet.toml to read.")] = None,
    json_mode: JsonFlag = False,
) -> None:
    """The exact argv and environment the daemon would launch (a file's, or a profile's)."""
    from daemon.cli.engine import recipe as cmd_recipe

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_recipe.show(out, opts.client(out), file, diff, profile, config))


@recipe_app.command("verify")
def recipe_verify(
    ctx: typer.Context,
    file: CheckpointOrRecipe = None,
    profile: ProfileOption = None,
    full: Annotated[
        bool, typer.Option("--full", help="Also hash every shard against the manifest.")
    ] = False,
    config: Annotated[Path | None, typer.Option("--config", help="fleet.toml to read.")] = None,
    json_mode: JsonFlag = False,
) -> None:
    """Check the checkpoint: every shard there, its size and header (exit 0 whole, 2 not)."""
    from daemon.cli.engine import checkpoint as cmd_checkpoint

    opts: GlobalOptions = ctx.obj
    raise typer.Exit(cmd_checkpoint.verify(opts.output(json_mode), file, config, profile, full))


@recipe_app.command("manifest")
def recipe_manifest(
    ctx: typer.Context,
    file: CheckpointOrRecipe = None,
    profile: ProfileOption = None,
    config: Annotated[Path | None, typer.Option("--config", help="fleet.toml to read.")] = None,
    json_mode: JsonFlag = False,
) -> None:
    """Hash every shard once into cmpfleet-manifest.json beside them (for verify --full)."""
    from daemon.cli.engine import checkpoint as cmd_checkpoint

    opts: GlobalOptions = ctx.obj
    raise typer.Exit(cmd_checkpoint.manifest(opts.output(json_mode), file, config, profile))


@canary_app.command("run")
def canary_run(
    ctx: typer.Context,
    name: Annotated[
        str | None,
        typer.Argument(
            metavar="[NAME]",
            help="The engine to judge, by its profile ([serving] run); default the primary.",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Run even while the engine is busy.")
    ] = False,
    deep: Annotated[
        bool,
        typer.Option("--deep", help="The deep round: copy, recall, loops at [canary] depths."),
    ] = False,
    json_mode: JsonFlag = False,
) -> None:
    """Run the engine canaries now (exit 0 all pass, 1 a warning or skipped, 2 a failure)."""
    from daemon.cli.rig import canary as cmd_canary

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_canary.run(out, opts.client(out, 3), force, deep, name))


@canary_app.command("status")
def canary_status(ctx: typer.Context, json_mode: JsonFlag = False) -> None:
    """The canaries' last results and log-signature counts (exit codes as canary run)."""
    from daemon.cli.rig import canary as cmd_canary

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_canary.status(out, opts.client(out, 3)))


@guard_app.command("key")
def guard_key(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The key's name in the accounts (laptop, ci...).")],
    stdin: Annotated[
        bool, typer.Option("--stdin", help="Hash a key read from stdin instead of a new one.")
    ] = False,
    json_mode: JsonFlag = False,
) -> None:
    """Make a client key: shown once, with the [[guard.keys]] table (its hash) for the config."""
    from daemon.cli.engine import guard as cmd_guard

    opts: GlobalOptions = ctx.obj
    raise typer.Exit(cmd_guard.key(opts.output(json_mode), name, stdin))


@guard_app.command("usage")
def guard_usage(
    ctx: typer.Context,
    hours: Annotated[int, typer.Option("--hours", min=1, max=168, help="How far back.")] = 24,
    json_mode: JsonFlag = False,
) -> None:
    """Prompt and completion tokens per client key and hour."""
    from daemon.cli.engine import guard as cmd_guard

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_guard.usage(out, opts.client(out, 3), hours))


CardOption = Annotated[
    int | None, typer.Option("--card", min=0, max=63, help="Only this card (NVML index).")
]


@app.command("card")
def card(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(help="An index, serial, UUID or PCI address; or `export`.")
    ],
    serial: Annotated[
        str | None, typer.Argument(help="With `export`: the card's serial (or any NAME).")
    ] = None,
    out_of_service: Annotated[
        str | None,
        typer.Option("--out-of-service", help="Bench the card: shown, never paged, no gate."),
    ] = None,
    in_service: Annotated[
        bool, typer.Option("--in-service", help="Bring a benched card back.")
    ] = False,
    output: Annotated[
        Path | None, typer.Option("--output", help="export: the JSON file (.html beside it).")
    ] = None,
    json_mode: JsonFlag = False,
) -> None:
    """A card's passport (diags, Xids, slots); `card export SERIAL`; --out-of-service REASON."""
    from daemon.cli.rig import card as cmd_card

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    if name == "export":
        if serial is None:
            out.fail("card export needs the card's SERIAL", 2)
        raise typer.Exit(cmd_card.export(out, opts.client(out), serial, output))
    if serial is not None:
        out.fail(f"card {name}: unexpected {serial!r} (card NAME, or card export SERIAL)", 2)
    if out_of_service is not None and in_service:
        out.fail("--out-of-service and --in-service: one or the other", 2)
    if out_of_service is not None or in_service:
        raise typer.Exit(cmd_card.mark(out, opts.client(out), name, out_of_service))
    raise typer.Exit(cmd_card.show(out, opts.client(out), name))


@diag_app.command("pcie")
def diag_pcie(ctx: typer.Context, card: CardOption = None, json_mode: JsonFlag = False) -> None:
    """Test each card's link both ways, data compared, all at once and alone (2: a finding)."""
    from daemon.cli.rig import card_diag as cmd_card_diag

    opts: GlobalOptions = ctx.find_root().obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_card_diag.run(out, opts.client(out), "pcie", card, 0.0))


@diag_app.command("compute")
def diag_compute(
    ctx: typer.Context,
    card: CardOption = None,
    minutes: Annotated[
        float,
        typer.Option("--minutes", min=0, max=1440, help="Keep every SM busy this long."),
    ] = 0.0,
    json_mode: JsonFlag = False,
) -> None:
    """Check every SM and the tensor cores bit for bit (engine stopped: else exit 4; 2: wrong)."""
    from daemon.cli.rig import card_diag as cmd_card_diag

    opts: GlobalOptions = ctx.find_root().obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_card_diag.run(out, opts.client(out), "compute", card, minutes))


@guard_app.command("sessions")
def guard_sessions(ctx: typer.Context, json_mode: JsonFlag = False) -> None:
    """The last hour's agent sessions: depth, cleaned turns, repairs, stale mark."""
    from daemon.cli.engine import guard as cmd_guard

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_guard.sessions(out, opts.client(out, 3)))


@diag_app.command("memtest")
def diag_memtest(
    ctx: typer.Context,
    card: Annotated[
        list[int] | None,
        typer.Option(
            "--card", min=0, max=63, help="Only this card (NVML index; repeat for several)."
        ),
    ] = None,
    gib: Annotated[
        float | None,
        typer.Option("--gib", min=0.001, max=256, help="GiB per card (default: all free memory)."),
    ] = None,
    patterns: Annotated[
        str | None,
        typer.Option(
            "--patterns",
            help="Comma-separated: solid, checkerboard, walking, address, moving-inversions, "
            "random (default: all).",
        ),
    ] = None,
    passes: Annotated[
        int, typer.Option("--passes", min=1, max=100, help="Passes of each pattern.")
    ] = 1,
    minutes: Annotated[
        float,
        typer.Option(
            "--minutes", min=0, max=1440, help="Then this long in the stress (step) mode."
        ),
    ] = 0.0,
    inject: Annotated[
        bool,
        typer.Option("--inject", help="Self-test: plant a known fault per pass, require it found."),
    ] = False,
    seed: Annotated[
        int | None,
        typer.Option("--seed", min=0, max=0xFFFFFFFF, help="The random data's seed."),
    ] = None,
    json_mode: JsonFlag = False,
) -> None:
    """Test the cards' memory on the cards (the engine must be stopped: else exit 4; 2: errors)."""
    from daemon.cli.rig import diag as cmd_diag

    opts: GlobalOptions = ctx.find_root().obj
    out = opts.output(json_mode)
    # Every --card given is tested (typer once kept the last one alone: issue 36).
    chosen = tuple(sorted(set(card))) if card else None
    request = cmd_diag.MemtestArgs(chosen, gib, patterns, passes, minutes, inject, seed)
    raise typer.Exit(cmd_diag.run_memtest(out, opts.client(out), request))


@alerts_app.callback(invoke_without_command=True)
def alerts(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 20,
    status: Annotated[
        str | None, typer.Option("--status", help="firing or resolved (default: both).")
    ] = None,
    json_mode: JsonFlag = False,
) -> None:
    """Recent alerts, newest first, with their delivery state per webhook."""
    from daemon.cli.rig import alerts as cmd_alerts

    if ctx.invoked_subcommand is not None:
        return
    opts: GlobalOptions = ctx.find_root().obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_alerts.list_alerts(out, opts.client(out), limit, status))


@alerts_app.command("test")
def alerts_test(
    ctx: typer.Context,
    sink: Annotated[
        str | None, typer.Option("--sink", help="Only this webhook (its name).")
    ] = None,
    timeout_s: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=0,
            help="Seconds to wait for a webhook that has not answered yet (one that failed "
            "is reported at once).",
        ),
    ] = 15,
    json_mode: JsonFlag = False,
) -> None:
    """Send a test alert through fleetd (exit 0 once every webhook answered 2xx)."""
    from daemon.cli.rig import alerts as cmd_alerts

    opts: GlobalOptions = ctx.find_root().obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_alerts.send_test(out, opts.client(out), sink, timeout_s))
