"""``fleetctl start|stop|restart|logs [NAME]``: NAME picks the engine, by its profile.

The status's ``engines`` list names each engine fleetd runs by its profile (``[serving]
run``: the first is the primary, the others run beside it). A NAME no engine serves is
refused in one line (exit 2) naming the engines and the command that makes NAME the rig's
engine. Without NAME, a rig with one engine acts on it, as it always did; a rig with
several refuses ``start|stop|restart`` in one line asking for NAME (a move of every engine
at once, two cold starts of up to 45 minutes each, is never a default), and ``logs``
shows the primary engine's.
"""

from __future__ import annotations

from typing import Any

from daemon.cli.client import ClientError, FleetClient
from daemon.cli.output import EXIT_BAD_INPUT, EXIT_FAILED, Output


def _engine_names(status: dict[str, Any]) -> list[str]:
    engines = status.get("engines") or [status.get("serving") or {}]
    return [str(engine["profile"]) for engine in engines if engine.get("profile")]


def check_engine_name(out: Output, client: FleetClient, name: str | None) -> None:
    """Return when NAME (or no NAME) names an engine here; else fail in one line."""
    if name is None:
        return
    try:
        status = client.status()
    except ClientError as exc:
        out.fail(str(exc), EXIT_FAILED)
    names = _engine_names(status)
    if name in names:
        return
    out.fail(
        f"no engine {name!r} on this rig (engines: {', '.join(names) or 'none'}); "
        f"`fleetctl serve {name}` makes it the rig's engine",
        EXIT_BAD_INPUT,
    )


def pick_engine(out: Output, client: FleetClient, name: str | None, verb: str) -> str | None:
    """The engine ``start|stop|restart`` moves: NAME checked, or the rig's only engine.

    None: the primary (the request then names no engine, as a one-engine fleetctl's did).
    A status that cannot be read leaves the move to say why, in its own words.
    """
    if name is not None:
        check_engine_name(out, client, name)
        return name
    try:
        names = _engine_names(client.status())
    except ClientError:
        return None
    if len(names) > 1:
        out.fail(
            f"this rig runs {len(names)} engines ({', '.join(names)}): name the one to "
            f"{verb}, e.g. `fleetctl {verb} {names[0]}`",
            EXIT_BAD_INPUT,
        )
    return None
