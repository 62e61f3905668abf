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

from daemon.cli.views.listview import ListColumn, list_lines
from daemon.cli.views.screen import SEVERITY_STYLE, Line, Piece, plain, to_rich

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
        self,
        title: str | None,
        columns: Sequence[str | ListColumn],
        rows: Sequence[Sequence[str | Text]],
    ) -> None:
        """A list fitted to the terminal; plain aligned lines into a pipe (never cut there).

        Plain strings are not markup. On a terminal the columns that matter keep their
        width, the text column wraps between words and what does not fit goes under its
        row (``daemon.cli.views.listview``): a word is never split.
        """
        flat = [[_piece(c) for c in row] for row in rows]
        width = self.console.width if self.is_terminal else None
        lines = list_lines(columns, flat, width)
        if title:
            lines.insert(0, Line(Piece(f"{title}:", "bold" if width else "")))
        if not self.is_terminal:
            self.write(plain(lines))
            return
        self.console.print(to_rich(lines), soft_wrap=True)

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


def _piece(cell: str | Text) -> Piece:
    """A cell as one line of text with its style (a rich ``Text``'s own style)."""
    if isinstance(cell, str):
        return Piece(_one_line(cell))
    return Piece(_one_line(cell.plain), str(cell.style) if cell.style else "")


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
