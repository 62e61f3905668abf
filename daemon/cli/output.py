"""Printing for fleetctl: one JSON document for scripts, rich tables for people.

When stdout is not a terminal the console is made very wide and colourless, so a table
never wraps or truncates the words scripts grep for.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from daemon.cli.pipes import PipeConsole

SEVERITY_STYLE = {"ok": "green", "warning": "yellow", "critical": "bold red", "unknown": "magenta"}

# Monitoring-plugin exit codes (status, check).
EXIT_OK, EXIT_WARNING, EXIT_CRITICAL, EXIT_UNKNOWN = 0, 1, 2, 3
# Other commands: 0 success; these for failures.
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_REFUSED = 4
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it


@dataclass
class Output:
    """Where and how fleetctl prints (passed down explicitly, no globals)."""

    json_mode: bool
    console: Console
    err: Console

    @classmethod
    def create(cls, json_mode: bool) -> Output:
        """A console sized for a terminal, or wide and plain for pipes."""
        tty = sys.stdout.isatty()
        console = PipeConsole(
            width=None if tty else 10_000, no_color=not tty, highlight=False, soft_wrap=not tty
        )
        err = PipeConsole(stderr=True, highlight=False, soft_wrap=True)
        return cls(json_mode=json_mode, console=console, err=err)

    def emit_json(self, document: Any) -> None:
        """Print one JSON document on stdout and nothing else."""
        sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
        sys.stdout.flush()

    def table(
        self, title: str | None, columns: Sequence[str], rows: Sequence[Sequence[str | Text]]
    ) -> None:
        """A rich table (never cut when stdout is a pipe); plain strings are not markup."""
        table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(cell if isinstance(cell, Text) else Text(cell) for cell in row))
        self.console.print(table)

    def line(self, text: str) -> None:
        """One line of human output."""
        self.console.print(text, markup=False)

    def fail_unknown(self, message: str) -> NoReturn:
        """Exit UNKNOWN (3); under ``--json`` still print ``{"overall": "unknown", ...}``.

        Scripts reading the JSON get a document when it matters most; people get one line.
        """
        if self.json_mode:
            self.emit_json(unknown_document(message))
        self.fail(message, EXIT_UNKNOWN, document=False)

    def fail(self, message: str, code: int = EXIT_FAILED, document: bool = True) -> NoReturn:
        """One clear line on stderr, then exit with ``code``.

        Under ``--json`` stdout still gets one document, ``{"error": ..., "exit_code": ...}``,
        so a script parsing it never meets an empty stream.
        """
        first = message.strip().splitlines()[0] if message.strip() else "failed"
        if self.json_mode and document:
            self.emit_json(error_document(first, code))
        self.err.print(f"fleetctl: {first}", markup=False)
        raise typer.Exit(code)


def unknown_document(message: str) -> dict[str, Any]:
    """What ``--json`` prints when a monitoring command ends UNKNOWN (3)."""
    return {"overall": "unknown", "error": message, "cards": [], "checks": []}


def error_document(message: str, code: int) -> dict[str, Any]:
    """What ``--json`` prints when any other command fails."""
    return {"error": message, "exit_code": code}


def severity_cell(severity: str) -> Text:
    """A coloured severity word for tables."""
    return Text(severity, style=SEVERITY_STYLE.get(severity, ""))
