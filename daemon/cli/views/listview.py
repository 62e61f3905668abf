"""Lists that fit the terminal: ``events``, ``alerts``, ``profiles``, ``fleet status``, ``builds``.

A box table squeezed into 80 columns cuts words mid-way ("refuse: host_") and pushes the
column a person came for off the screen (an alert's delivery). Here a list is laid out for
the width it gets: the columns that matter come first (``rank``) and keep their width; one
text column (``flex``: a message, a summary) takes the rest of the line and wraps between
words under itself; a column that does not fit beside them goes under the row as
``name: value`` (``below`` asks for that whatever the width), so nothing is ever cut or
hidden. Into a pipe (``width=None``) every row stays one line with every column, as
``daemon.cli.views.screen.table_lines`` draws it.

Pure: rows of ``Piece``s in, ``Line``s out. ``short_time`` writes an ISO time the way a
narrow list wants it (``12-04 17:27:35``, local).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from daemon.cli.views.screen import GAP, Column, Line, Piece, table_lines, wrap

MIN_FLEX = 32  # a message column narrower than this goes under its row instead
BELOW_INDENT = 4


@dataclass(frozen=True)
class ListColumn:
    """A list's column: ``rank`` (0 is kept first), right-aligned, the text that wraps.

    ``flex``: takes what the kept columns leave and wraps there (one per list; the last
    column when none says so). ``below``: always on its own line under the row.
    """

    name: str
    rank: int = 0
    right: bool = False
    flex: bool = False
    below: bool = False
    # On a terminal, at most this many lines of the wrapping text (``…`` marks the cut;
    # the whole text stays in --json and a pipe's lines): one long row cannot fill a screen.
    max_lines: int | None = None


def short_time(iso: str | None) -> str:
    """An ISO time as local ``MM-DD HH:MM:SS`` (the input when it is not one)."""
    if not iso:
        return "-"
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%m-%d %H:%M:%S")
    except (TypeError, ValueError):
        return iso


def _columns(columns: Sequence[str | ListColumn]) -> list[ListColumn]:
    made = [
        c if isinstance(c, ListColumn) else ListColumn(c, rank) for rank, c in enumerate(columns)
    ]
    if not any(c.flex for c in made):
        last = len(made) - 1
        made[last] = ListColumn(
            made[last].name, made[last].rank, made[last].right, True, made[last].below
        )
    return made


def _width_of(column: ListColumn, position: int, rows: Sequence[Sequence[Piece]]) -> int:
    return max([len(column.name), *(len(row[position].text) for row in rows)])


def _kept(
    columns: list[ListColumn], rows: Sequence[Sequence[Piece]], width: int
) -> tuple[list[int], int | None]:
    """The fixed columns that stay in the row, and the flex column's room (None: below)."""
    flex = next(i for i, c in enumerate(columns) if c.flex)
    fixed = [i for i, c in enumerate(columns) if not c.flex and not c.below]
    kept: list[int] = []
    used = 0
    for position in sorted(fixed, key=lambda i: columns[i].rank):
        extra = _width_of(columns[position], position, rows) + (GAP if kept else 0)
        if kept and used + extra + GAP + MIN_FLEX > width:
            continue  # it goes under the row: the text column keeps its room
        kept.append(position)
        used += extra
    room = width - used - GAP
    if columns[flex].below or room < MIN_FLEX:
        return sorted(kept), None
    return sorted(kept), room


def list_lines(
    columns: Sequence[str | ListColumn],
    rows: Sequence[Sequence[Piece]],
    width: int | None,
    header_style: str = "bold",
) -> list[Line]:
    """A header and the rows fitted to ``width``; one plain line per row when ``None``."""
    made = _columns(columns)
    if width is None:
        heads = [Column(c.name, n, c.right) for n, c in enumerate(made)]
        return table_lines(heads, rows, None, header_style)
    kept, room = _kept(made, rows, width)
    flex = next(i for i, c in enumerate(made) if c.flex)
    shown = kept + ([flex] if room is not None else [])
    sizes = {i: _width_of(made[i], i, rows) for i in kept}
    lines = [_row([Piece(made[i].name, header_style) for i in shown], shown, made, sizes)]
    start = sum(sizes[i] + GAP for i in kept)
    most = made[flex].max_lines
    for row in rows:
        cells = [row[i] for i in shown]
        under = wrap([row[flex]], width, BELOW_INDENT, lead=BELOW_INDENT)
        text = wrap([row[flex]], room or width, 0)
        # Beside the row while it costs no more lines than under it, and no word is cut.
        beside = (
            room is not None
            and _longest_word(row[flex].text) <= room
            and len(text) <= len(under) + 1
        )
        if most is not None:  # the same choice as for the whole text, then cut
            under = wrap([row[flex]], width, BELOW_INDENT, max_lines=most, lead=BELOW_INDENT)
            text = wrap([row[flex]], room or width, 0, max_lines=most)
        if beside:
            lines.append(_row([*cells[:-1], *text[0].pieces], shown, made, sizes))
            lines += [Line(" " * start, *more.pieces) for more in text[1:]]
        else:  # a long text, or a word longer than the column (a UUID, a path): under, whole
            lines.append(_row(cells[: len(kept)], shown, made, sizes))
            if row[flex].text:
                lines += under
        for position in range(len(made)):
            if position in shown or position == flex or row[position].text in ("", "-"):
                continue
            label = Piece(f"{made[position].name}:", "dim")
            lines += wrap([label, row[position]], width, BELOW_INDENT + 2, lead=BELOW_INDENT)
    return lines


def _longest_word(text: str) -> int:
    return max((len(word) for word in text.split()), default=0)


def _row(
    cells: Sequence[Piece], shown: list[int], columns: list[ListColumn], sizes: dict[int, int]
) -> Line:
    """One row's kept cells padded to their columns (the flex text last, unpadded)."""
    line = Line()
    fixed = [i for i in shown if i in sizes]
    for n, position in enumerate(fixed):
        cell = cells[n]
        pad = " " * (sizes[position] - len(cell.text))
        if columns[position].right:
            line.add(pad).add(cell.text, cell.style)
        else:
            line.add(cell.text, cell.style).add(pad)
        line.add(" " * GAP)
    for cell in cells[len(fixed) :]:
        line.add(cell.text, cell.style)
    return line
