"""Printing for fleetctl: one JSON document for scripts, rich tables for people.

When stdout is not a terminal the console is made very wide and colourless, so a line
never wraps or truncates the words scripts grep for, and tables are plain aligned text
(``daemon.cli.views.screen``: no box drawing, no trailing spaces; rich padded every cell, so a
10,000-column pipe console wrote kilobytes of blanks per row). ``--no-color`` and
``$NO_COLOR`` turn colours off on a terminal too.

rich (and typer, for the exit) are imported on first use, not with this module: the
consoles are made when something is printed through them, so ``fleetctl status`` into a
pipe writes its plain lines without loading rich at all.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from daemon.cli.views.screen import SEVERITY_STYLE, Column, Piece, plain, table_lines

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text


# Monitoring-plugin exit codes (status, check).
EXIT_OK, EXIT_WARNING, EXIT_CRITICAL, EXIT_UNKNOWN = 0, 1, 2, 3
# Other commands: 0 success; these for failures.
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_REFUSED = 4
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it


@functools.cache
def _console_class() -> type[Console]:
    """rich's console, reporting a closed pipe instead of exiting 1 by itself (see pipes)."""
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            """Called by rich when its write fails with ``EPIPE``."""
            self.quiet = True  # nothing more from this console
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    return PipeConsole


class Output:
    """Where and how fleetctl prints (passed down explicitly, no globals)."""

    def __init__(self, json_mode: bool, no_color: bool = False) -> None:
        self.json_mode = json_mode
        # no-color.org: NO_COLOR set to anything non-empty turns colour off.
        self.no_color = no_color or bool(os.environ.get("NO_COLOR"))
        self.is_terminal = sys.stdout.isatty()  # else: one plain frame, plain tables

    @classmethod
    def create(cls, json_mode: bool, no_color: bool = False) -> Output:
        """The output for a command (JSON or human; colour unless turned off)."""
        return cls(json_mode, no_color)

    @functools.cached_property
    def console(self) -> Console:
        """stdout: sized for a terminal, or very wide and colourless for a pipe."""
        tty = self.is_terminal
        return _console_class()(
            width=None if tty else 10_000,
            no_color=self.no_color or not tty,
            highlight=False,
            soft_wrap=not tty,
        )

    @functools.cached_property
    def err(self) -> Console:
        """stderr, for errors and progress."""
        return _console_class()(
            stderr=True, highlight=False, soft_wrap=True, no_color=self.no_color
        )

    @property
    def colour(self) -> bool:
        """Whether stdout gets colours (a terminal, and not ``--no-color``/``$NO_COLOR``)."""
        return self.is_terminal and not self.no_color

    def emit_json(self, document: Any) -> None:
        """Print one JSON document on stdout and nothing else."""
        sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
        sys.stdout.flush()

    def table(
        self, title: str | None, columns: Sequence[str], rows: Sequence[Sequence[str | Text]]
    ) -> None:
        """A rich table on a terminal; plain aligned lines into a pipe (never cut there).

        Plain strings are not markup. On a terminal no column is narrower than its
        longest word, so a word is wrapped whole onto the next line, never split.
        """
        if not self.is_terminal:
            if title:
                self.line(f"{title}:")
            flat = [
                [Piece(_one_line(c if isinstance(c, str) else c.plain)) for c in row]
                for row in rows
            ]
            heads = [Column(name, rank) for rank, name in enumerate(columns)]
            self.write(plain(table_lines(heads, flat, None)))
            return
        from rich.table import Table
        from rich.text import Text

        table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
        for position, column in enumerate(columns):
            words = [_longest_word(row[position]) for row in rows if position < len(row)]
            table.add_column(column, overflow="fold", min_width=max([len(column), *words]))
        for row in rows:
            table.add_row(*(cell if isinstance(cell, Text) else Text(cell) for cell in row))
        self.console.print(table)

    def write(self, text: str) -> None:
        """Text as it is (lines already laid out, ``daemon.cli.views.screen.plain``)."""
        sys.stdout.write(text)

    def line(self, text: str) -> None:
        """One line of human output (into a pipe: written as it is, rich not needed)."""
        if self.is_terminal:
            self.console.print(text, markup=False)
        else:
            sys.stdout.write(text.rstrip() + "\n")

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
        import typer  # the exit click understands (a failure may pay for the import)

        raise typer.Exit(code)


def _one_line(text: str) -> str:
    """A cell on one line (a row of a piped table is one line, for grep and awk)."""
    return " ".join(text.split()) if ("\n" in text or "\t" in text) else text


LONGEST_UNSPLIT = 24  # a longer word (a path, a URL) may still fold on a narrow terminal


def _longest_word(cell: str | Text) -> int:
    text = cell if isinstance(cell, str) else cell.plain
    return min(LONGEST_UNSPLIT, max((len(word) for word in text.split()), default=0))


def unknown_document(message: str) -> dict[str, Any]:
    """What ``--json`` prints when a monitoring command ends UNKNOWN (3)."""
    return {"overall": "unknown", "error": message, "cards": [], "checks": []}


def error_document(message: str, code: int) -> dict[str, Any]:
    """What ``--json`` prints when any other command fails."""
    return {"error": message, "exit_code": code}


def severity_cell(severity: str) -> Text:
    """A coloured severity word for tables."""
    from rich.text import Text

    return Text(severity, style=SEVERITY_STYLE.get(severity, ""))
