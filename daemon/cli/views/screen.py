"""Lines that fit a terminal: columns dropped by priority, text wrapped between words.

fleetctl's views (``status``, ``check``, ``top``, ``fleet top``) are built as ``Line``s of
styled pieces, laid out for a known width: a table keeps its most important columns and
drops the rest rather than squeezing them (rich folds a cell narrower than its words:
"unlocke/d", "critica/l"), and free text is wrapped at spaces with a hanging indent. Pure
and rich-free: a pipe gets ``plain()`` (no trailing spaces, no colour), a terminal
``to_rich()`` (imported only then). A single word longer than the whole line is the one
thing ever shortened, and then with a visible ``…``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

GAP = 2  # spaces between columns
SEVERITY_STYLE = {"ok": "green", "warning": "yellow", "critical": "bold red", "unknown": "magenta"}
ELLIPSIS = "…"


@dataclass(frozen=True)
class Piece:
    """Some text and its rich style (``""``: plain)."""

    text: str
    style: str = ""


class Line:
    """One output line made of styled pieces."""

    __slots__ = ("pieces",)

    def __init__(self, *pieces: Piece | str) -> None:
        self.pieces = [p if isinstance(p, Piece) else Piece(p) for p in pieces]

    def add(self, text: str, style: str = "") -> Line:
        """Append a piece (returns the line, for chaining)."""
        self.pieces.append(Piece(text, style))
        return self

    def join(self, word: Piece, space: bool) -> None:
        """Append a word, after a space; a run of one style stays one piece (one escape)."""
        last = self.pieces[-1] if self.pieces else None
        if last is not None and last.style == word.style:
            self.pieces[-1] = Piece(last.text + (" " if space else "") + word.text, word.style)
            return
        if space:
            self.pieces.append(Piece(" "))
        self.pieces.append(word)

    @property
    def plain(self) -> str:
        """The text without styles or trailing spaces."""
        return "".join(p.text for p in self.pieces).rstrip()

    def __len__(self) -> int:
        return len(self.plain)


@dataclass(frozen=True)
class Column:
    """A table column: its header, its rank (0 is kept first) and its alignment."""

    name: str
    rank: int
    right: bool = False


def chosen_columns(
    columns: Sequence[Column], rows: Sequence[Sequence[Piece]], width: int | None
) -> list[int]:
    """The positions of the columns that fit ``width`` (all of them when ``None``).

    Columns are taken in rank order until the next one does not fit; each is as wide as its
    widest cell, so nothing in it is ever cut. The first-ranked column is always kept.
    """
    sizes = [
        max([len(column.name), *(len(row[i].text) for row in rows)])
        for i, column in enumerate(columns)
    ]
    if width is None:
        return list(range(len(columns)))
    kept: list[int] = []
    used = 0
    for position in sorted(range(len(columns)), key=lambda i: columns[i].rank):
        extra = sizes[position] + (GAP if kept else 0)
        if kept and used + extra > width:
            break  # the next in rank does not fit: a lesser one does not jump the queue
        kept.append(position)
        used += extra
    return sorted(kept)


def table_lines(
    columns: Sequence[Column],
    rows: Sequence[Sequence[Piece]],
    width: int | None,
    header_style: str = "bold",
) -> list[Line]:
    """A header line and one line per row with the columns that fit ``width``."""
    keep = chosen_columns(columns, rows, width)
    sizes = {i: max([len(columns[i].name), *(len(row[i].text) for row in rows)]) for i in keep}
    lines = []
    header = [Piece(columns[i].name, header_style) for i in keep]
    for cells in (header, *([row[i] for i in keep] for row in rows)):
        line = Line()
        for n, (position, cell) in enumerate(zip(keep, cells, strict=True)):
            pad = " " * (sizes[position] - len(cell.text))
            last = n == len(keep) - 1
            if columns[position].right:
                line.add(pad).add(cell.text, cell.style)
            else:
                line.add(cell.text, cell.style)
                if not last:
                    line.add(pad)
            if not last:
                line.add(" " * GAP)
        lines.append(line)
    return lines


def wrap(
    pieces: Iterable[Piece],
    width: int | None,
    indent: int = 2,
    max_lines: int | None = None,
    lead: int = 0,
) -> list[Line]:
    """Pieces flowed into lines of at most ``width``, broken only between words.

    Words are separated by one space (pieces too); the first line starts with ``lead``
    spaces, continuation lines with ``indent``. With ``max_lines`` the last kept line ends
    in ``…`` when text was left out. ``width=None``: one line, as long as it is.
    """
    limit = sys.maxsize if width is None else width
    rows: list[list[Piece]] = [[]]
    used = lead
    for piece in pieces:
        for found in piece.text.split():
            space = 1 if rows[-1] else 0
            if rows[-1] and used + space + len(found) > limit:
                rows.append([])
                used, space = indent, 0
            room = limit - used - space
            # A word wider than a whole line is the one thing shortened, visibly.
            word = found if len(found) <= room else found[: max(1, room - 1)] + ELLIPSIS
            rows[-1].append(Piece(word, piece.style))
            used += space + len(word)
    if max_lines is not None and len(rows) > max_lines:
        rows = rows[:max_lines]
        last = rows[-1]
        start = indent if len(rows) > 1 else lead
        while last and start + sum(len(p.text) + 1 for p in last) + 1 > limit:
            last.pop()
        last.append(Piece(ELLIPSIS))
    lines = []
    for n, words in enumerate(rows):
        line = Line(" " * (indent if n else lead))
        for k, piece in enumerate(words):
            line.join(piece, space=k > 0)
        lines.append(line)
    return lines


def flow(pieces: Iterable[Piece], width: int | None, indent: int = 4) -> list[Line]:
    """Pieces two spaces apart, each kept whole: a line breaks only between pieces."""
    lines = [Line()]
    used = 0
    for piece in pieces:
        gap = GAP if used else 0
        if width is not None and used > indent and used + gap + len(piece.text) > width:
            lines.append(Line(" " * indent))
            used, gap = indent, 0
        lines[-1].add(" " * gap).add(piece.text, piece.style)
        used += gap + len(piece.text)
    return lines


def plain(lines: Iterable[Line]) -> str:
    """The lines as text for a pipe: no colour, no trailing spaces."""
    return "".join(line.plain + "\n" for line in lines)


def to_rich(lines: Sequence[Line]) -> Text:
    """The lines as one rich ``Text`` (for a terminal), each line kept unwrapped."""
    from rich.text import Text

    text = Text(no_wrap=True, overflow="crop", end="")
    for n, line in enumerate(lines):
        if n:
            text.append("\n")
        for piece in line.pieces:
            text.append(piece.text, style=piece.style or None)
    return text
