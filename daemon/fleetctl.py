"""``fleetctl`` entry point: one clear line for every error, never a traceback.

``fleetctl --version`` is answered here before the command tree (typer) is imported:
people and scripts run it to check a rig quickly, and it needs nothing else.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
from types import ModuleType
from typing import Any

MONITORING_COMMANDS = frozenset({"status", "check"})
EXIT_USAGE = 2
EXIT_UNKNOWN = 3
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def _usage_exit_code(argv: list[str]) -> int:
    """2 for a usage error; 3 (UNKNOWN) for the monitoring commands, where 2 is CRITICAL."""
    return EXIT_UNKNOWN if MONITORING_COMMANDS & set(argv) else EXIT_USAGE


def _failure_document(argv: list[str], message: str, code: int) -> None:
    """Under ``--json`` a failure still prints its one document, as every command's does."""
    if "--json" not in argv:
        return
    from daemon.cli.output import error_document, unknown_document

    document = unknown_document(message) if code == EXIT_UNKNOWN else error_document(message, code)
    sys.stdout.write(json.dumps(document, indent=2) + "\n")


def _unexpected(exc: Exception, argv: list[str]) -> int:
    """The last resort for an error no command foresaw: one line (a document under --json).

    Most often a daemon of another version (or another program on fleetd's port) answered
    JSON of another shape. ``FLEETCTL_DEBUG=1`` lets the traceback through for a bug report.
    """
    monitoring = bool(MONITORING_COMMANDS & set(argv))
    code = EXIT_UNKNOWN if monitoring else EXIT_FAILED
    message = (
        f"unexpected {exc.__class__.__name__}: {exc} (an answer this fleetctl cannot read, "
        "from another fleetd version or not fleetd at all, or a bug: FLEETCTL_DEBUG=1 shows "
        "the traceback)"
    )
    _failure_document(argv, message, code)
    sys.stderr.write(f"fleetctl: {message}\n")
    return code


def _click_exceptions() -> ModuleType:
    """The click exceptions typer raises (newer typer vendors click as ``typer._click``)."""
    try:
        return importlib.import_module("typer._click.exceptions")
    except ImportError:
        return importlib.import_module("click.exceptions")


def _version_only(argv: list[str]) -> bool:
    """``fleetctl --version`` (or ``--json --version``): print the version, nothing more."""
    if "--version" not in argv or not set(argv) <= {"--version", "--json"}:
        return False
    from web.version import build_info

    info = build_info()
    if "--json" in argv:
        sys.stdout.write(json.dumps(info, indent=2) + "\n")
    else:
        sys.stdout.write(f"fleetctl {info['version']}\n")
    return True


def _fast_status(argv: list[str]) -> int | None:
    """``status`` by its fast path (``daemon.cli.fastpath``), or None for the typer path."""
    from daemon.cli.fastpath import run_status
    from daemon.cli.pipes import OutputClosed

    try:
        code = run_status(argv)
    except KeyboardInterrupt:
        sys.stderr.write("fleetctl: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:  # as below: one line, never a traceback
        if isinstance(exc, OutputClosed | BrokenPipeError) or os.environ.get("FLEETCTL_DEBUG"):
            raise
        return _unexpected(exc, argv)
    if code is not None:
        sys.stdout.flush()  # a reader that left early must be met here
    return code


@functools.cache
def click_command() -> Any:
    """The CLI as click's command, built once per process.

    ``app()`` builds it again at every call from each command's signature (93 commands:
    0.16 s of CPU on a slow 2-core machine, most of a quick command's time); a process that
    runs ``main`` more than once (the tests' in-process runs, a forked launcher that built
    it before the fork) pays it once.
    """
    import typer.main

    from daemon.cli.app import app

    return typer.main.get_command(app)


def _run() -> int:
    """Run the CLI and return its exit code; usage errors are one line on stderr."""
    if _version_only(sys.argv[1:]):
        return 0
    if (code := _fast_status(sys.argv[1:])) is not None:
        return code
    import typer

    from daemon.cli.pipes import OutputClosed

    click = _click_exceptions()
    try:
        code = click_command()(standalone_mode=False, prog_name="fleetctl")
    except click.NoArgsIsHelpError as exc:
        # A person gets the help (on stderr: it is no answer); a script (--json) its document.
        if "--json" not in sys.argv[1:]:
            exc.show()
            return EXIT_USAGE
        path = exc.ctx.command_path if exc.ctx else "fleetctl"
        message = f"{path} needs a command (see {path} --help)"
        _failure_document(sys.argv[1:], message, EXIT_USAGE)
        sys.stderr.write(f"fleetctl: {message}\n")
        return EXIT_USAGE
    except click.UsageError as exc:
        hint = (
            f" (see fleetctl {exc.ctx.command_path.split(' ', 1)[1]} --help)"
            if exc.ctx and " " in exc.ctx.command_path
            else " (see fleetctl --help)"
        )
        code = _usage_exit_code(sys.argv[1:])
        _failure_document(sys.argv[1:], exc.format_message(), code)
        sys.stderr.write(f"fleetctl: {exc.format_message()}{hint}\n")
        return code
    except click.ClickException as exc:
        sys.stderr.write(f"fleetctl: {exc.format_message()}\n")
        return int(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        sys.stderr.write("fleetctl: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:  # the one place every error no command foresaw ends
        if isinstance(exc, OutputClosed | BrokenPipeError) or os.environ.get("FLEETCTL_DEBUG"):
            raise  # a reader that left early: main() ends quietly
        return _unexpected(exc, sys.argv[1:])
    sys.stdout.flush()  # a reader that left early must be met here, not at interpreter exit
    return code if isinstance(code, int) else 0


def main() -> None:
    """Run the CLI; a closed stdout (``| head``) ends it quietly with 141, like SIGPIPE."""
    from daemon.cli.pipes import EXIT_OUTPUT_CLOSED, OutputClosed, silence_closed_output

    try:
        code = _run()
    except (OutputClosed, BrokenPipeError):
        silence_closed_output()
        code = EXIT_OUTPUT_CLOSED
    sys.exit(code)


if __name__ == "__main__":
    main()
