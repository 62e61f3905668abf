"""fleetctl's engine and recovery commands (``app`` registers them in its tree).

start, profiles, serve, stop, restart, reboot, clear-reboot-latch, drain, undrain, logs, builds
and rollback. Apart from ``app`` (the tree and the other commands) to keep each module small; the same
start-up rule holds: each command imports what it uses in its own body, so registering
them loads typer only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from daemon.cli.app_options import JsonFlag, NoWait, StopForeign, WaitTimeout
from daemon.cli.options import GlobalOptions

if TYPE_CHECKING:
    from daemon.cli.client import FleetClient
    from daemon.cli.output import Output

# NAME of ``start|stop|restart|logs``: the engine, by its profile (``engine_name``).
EngineName = Annotated[
    str | None,
    typer.Argument(
        help="The engine, by its profile (default: the rig's engine).", show_default=False
    ),
]

# An engine move through the daemon (``serving.action``, ``profiles.serve``): out, client,
# its name (the action or the profile), wait, timeout_s, stop_foreign; the exit code.
EngineMove = Callable[["Output", "FleetClient", str, bool, float, bool], int]


def _move_engine(
    ctx: typer.Context,
    move: EngineMove,
    name: str,
    no_wait: bool,
    timeout_s: float,
    json_mode: bool,
    stop_foreign: bool = False,
) -> NoReturn:
    """Run one engine move and exit with its code (``serve``)."""
    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    client = opts.client(out)
    raise typer.Exit(move(out, client, name, not no_wait, timeout_s, stop_foreign))


def _move_named(
    ctx: typer.Context,
    verb: str,
    no_wait: bool,
    timeout_s: float,
    json_mode: bool,
    stop_foreign: bool = False,
    engine: str | None = None,
) -> NoReturn:
    """``start|stop|restart [NAME]``: the engine picked (``engine_name``), moved, its exit code."""
    from daemon.cli.engine.engine_name import pick_engine
    from daemon.cli.engine.serving import action

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    client = opts.client(out)
    target = pick_engine(out, client, engine, verb)
    wait = not no_wait
    raise typer.Exit(action(out, client, verb, wait, timeout_s, stop_foreign, engine=target))


def start(
    ctx: typer.Context,
    engine: EngineName = None,
    no_wait: NoWait = False,
    timeout_s: WaitTimeout = 3600,
    stop_foreign: StopForeign = False,
    json_mode: JsonFlag = False,
) -> None:
    """Start the engine and wait until it is ready (exit 4 when refused, e.g. reboot latch)."""
    _move_named(ctx, "start", no_wait, timeout_s, json_mode, stop_foreign, engine)


def profiles(ctx: typer.Context, json_mode: JsonFlag = False) -> None:
    """The launch profiles (* marks the one in force) and each one's lint verdict."""
    from daemon.cli.engine import profiles as cmd_profiles

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_profiles.profiles(out, opts.client(out)))


def serve(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The profile to serve (see fleetctl profiles).")],
    no_wait: NoWait = False,
    timeout_s: WaitTimeout = 3600,
    stop_foreign: StopForeign = False,
    json_mode: JsonFlag = False,
) -> None:
    """Stop the running engine cleanly and start profile NAME (exit 4 refused, 2 unknown NAME)."""
    from daemon.cli.engine.profiles import serve as switch_to

    _move_engine(ctx, switch_to, name, no_wait, timeout_s, json_mode, stop_foreign)


def stop(
    ctx: typer.Context,
    engine: EngineName = None,
    no_wait: NoWait = False,
    timeout_s: WaitTimeout = 300,
    json_mode: JsonFlag = False,
) -> None:
    """Stop the engine gracefully (SIGINT, then SIGTERM; never SIGKILL unless allow_kill)."""
    _move_named(ctx, "stop", no_wait, timeout_s, json_mode, engine=engine)


def restart(
    ctx: typer.Context,
    engine: EngineName = None,
    no_wait: NoWait = False,
    timeout_s: WaitTimeout = 3600,
    json_mode: JsonFlag = False,
) -> None:
    """Stop, then start the engine and wait until it is ready (exit 4 when refused)."""
    _move_named(ctx, "restart", no_wait, timeout_s, json_mode, engine=engine)


def reboot(
    ctx: typer.Context,
    confirm: Annotated[
        bool, typer.Option("--confirm", help="Do it (without: only explain what would happen).")
    ] = False,
    cold: Annotated[
        bool,
        typer.Option("--cold", help="Power-cycle instead ([recovery] power_cycle_command)."),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help=(
                "Reboot even when the default boot entry is not the baseline kernel, or warm "
                "while the latch asks for a cold power cycle."
            ),
        ),
    ] = False,
    timeout_s: Annotated[
        float,
        typer.Option("--timeout", min=1, help="Seconds to wait for the clean stop and the reboot."),
    ] = 900,
    json_mode: JsonFlag = False,
) -> None:
    """Stop the engine cleanly, then reboot the host (the configured reboot_command)."""
    from daemon.cli.engine import recovery as cmd_recovery

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_recovery.reboot(out, opts.client(out), confirm, timeout_s, cold, force))


def clear_reboot_latch(
    ctx: typer.Context,
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded in the audit trail).")],
    json_mode: JsonFlag = False,
) -> None:
    """Clear the reboot-required latch by hand (a recorded operator override)."""
    from daemon.cli.engine import recovery as cmd_recovery

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_recovery.clear_latch(out, opts.client(out), reason))


def logs(
    ctx: typer.Context,
    engine: EngineName = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new lines.")
    ] = False,
    lines: Annotated[int, typer.Option("--lines", "-n", min=0, max=100000)] = 100,
    json_mode: JsonFlag = False,
) -> None:
    """The engine's log (captured by fleetd)."""
    from daemon.cli.engine import serving as cmd_serving

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    client = opts.client(out)
    if engine is not None:
        from daemon.cli.engine.engine_name import check_engine_name

        check_engine_name(out, client, engine)
    raise typer.Exit(cmd_serving.logs(out, client, lines, follow, engine))


def builds(
    ctx: typer.Context,
    engine: Annotated[
        str | None,
        typer.Option("--engine", help="A side engine's profile ([serving] run): its own builds."),
    ] = None,
    json_mode: JsonFlag = False,
) -> None:
    """The engine builds seen (image digest, /version, labels) and their canary verdicts."""
    from daemon.cli.engine import builds as cmd_builds

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_builds.show(out, opts.client(out, 3), engine))


def rollback(
    ctx: typer.Context,
    to: Annotated[
        str | None,
        typer.Option("--to", help="The build to serve (its key or a prefix; see fleetctl builds)."),
    ] = None,
    no_wait: NoWait = False,
    timeout_s: WaitTimeout = 3600,
    stop_foreign: StopForeign = False,
    json_mode: JsonFlag = False,
) -> None:
    """Serve the last build whose canaries passed again, by its image's digest.

    Exit 4 refused, 2 unknown build, 1 for a bare process (it prints what to run).
    """
    from daemon.cli.engine.rollback import rollback as roll_back

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    code = roll_back(out, opts.client(out), to, not no_wait, timeout_s, stop_foreign)
    raise typer.Exit(code)


def drain(
    ctx: typer.Context,
    grace_s: Annotated[
        float | None,
        typer.Option(
            "--grace-s",
            min=0,
            max=86400,
            help="Seconds running requests have (default [recovery] drain_grace_s).",
        ),
    ] = None,
    reason: Annotated[str, typer.Option("--reason", help="Why (shown and recorded).")] = "",
    json_mode: JsonFlag = False,
) -> None:
    """Drain the rig: its guard's /health and new requests answer 503 draining."""
    from daemon.cli.engine import drain as cmd_drain

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_drain.drain(out, opts.client(out), grace_s, reason))


def undrain(ctx: typer.Context, json_mode: JsonFlag = False) -> None:
    """End the drain: the guard serves again."""
    from daemon.cli.engine import drain as cmd_drain

    opts: GlobalOptions = ctx.obj
    out = opts.output(json_mode)
    raise typer.Exit(cmd_drain.undrain(out, opts.client(out)))


def register(app: typer.Typer) -> None:
    """Add the engine and recovery commands to ``app``, in the order help lists them."""
    app.command("start")(start)
    app.command("profiles")(profiles)
    app.command("serve")(serve)
    app.command("stop")(stop)
    app.command("restart")(restart)
    app.command("reboot")(reboot)
    app.command("clear-reboot-latch")(clear_reboot_latch)
    app.command("drain")(drain)
    app.command("undrain")(undrain)
    app.command("logs")(logs)
    app.command("builds")(builds)
    app.command("rollback")(rollback)
