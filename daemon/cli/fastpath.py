"""``fleetctl status`` without building the command tree: the check a monitor runs a lot.

Nagios, cron and shell prompts run ``fleetctl status`` every minute or more often; typer
costs 60 to 200 ms before a command runs (importing it, and pydantic to coerce each
option's value). This reads exactly the shapes ``fleetctl [GLOBAL OPTIONS] status
[--json]`` can take and runs the same code the typer command runs
(``GlobalOptions``, ``cmd_daemon.status``). Anything else, ``-h`` or a typo included,
returns ``None`` and goes through typer, which owns the usage errors and the help, so the
two can never disagree about what a command line means: this path accepts a subset.
"""

from __future__ import annotations

import os
from pathlib import Path

from daemon.cli.options import DEFAULT_URL, GlobalOptions

# Global options that take a value, and the environment variable each falls back to.
_VALUED = {
    "--url": "FLEETCTL_URL",
    "--token-file": None,
    "--rig": None,
    "--fleet": "FLEETCTL_FLEET",
}
_FLAGS = frozenset({"--json", "--no-color"})


def parse_status(argv: list[str]) -> tuple[GlobalOptions, bool] | None:
    """(options, ``--json`` after the command) for a plain ``status``; else ``None``."""
    values: dict[str, str] = {}
    flags: set[str] = set()
    position = 0
    while position < len(argv) and argv[position] != "status":
        word = argv[position]
        name, equals, given = word.partition("=")
        if name in _VALUED and name not in values:
            if equals:
                values[name] = given
            elif position + 1 < len(argv):
                values[name] = argv[position + 1]
                position += 1
            else:
                return None
        elif word in _FLAGS and word not in flags:
            flags.add(word)
        else:
            return None
        position += 1
    rest = argv[position + 1 :]
    if position == len(argv) or rest not in ([], ["--json"]):
        return None
    if any(value == "" or value.startswith("-") for value in values.values()):
        return None  # typer's error message for a missing value
    for name, variable in _VALUED.items():
        if name not in values and variable and os.environ.get(variable):
            values[name] = os.environ[variable]
    token_file, fleet_file = values.get("--token-file"), values.get("--fleet")
    options = GlobalOptions(
        url=values.get("--url", DEFAULT_URL),
        token_file=None if token_file is None else Path(token_file),
        rig=values.get("--rig"),
        json_mode="--json" in flags,
        fleet_file=None if fleet_file is None else Path(fleet_file),
        no_color="--no-color" in flags,
    )
    return options, bool(rest)


def run_status(argv: list[str]) -> int | None:
    """Run ``status`` when ``argv`` is a plain one; its exit code, else ``None``."""
    parsed = parse_status(argv)
    if parsed is None:
        return None
    options, json_here = parsed
    from daemon.cli.output import EXIT_UNKNOWN
    from daemon.cli.rig import status as cmd_daemon

    out = options.output(json_here)
    try:
        return cmd_daemon.status(out, options.client(out, EXIT_UNKNOWN))
    except RuntimeError as exc:
        import typer  # out.fail ended the command the way typer commands end

        if isinstance(exc, typer.Exit):
            return int(exc.exit_code)
        raise
