"""Tables and lines for a reader that is not a terminal: aligned, unpadded, no box drawing.

A pipe is read by ``grep``, ``awk`` and ``cut``: each row is one line, columns are
separated by at least two spaces, the last column is never padded and no line ends in
spaces (rich pads every cell to its column, so a 10,000-column pipe console wrote
kilobytes of trailing blanks per row). No colour codes, no ``━`` rules.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

GAP = "  "


def one_line(text: str) -> str:
    """A cell on one line: newlines and tabs become spaces (a row stays one line)."""
    return " ".join(text.split()) if ("\n" in text or "\t" in text) else text


def plain_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> Iterator[str]:
    """The header and one line per row, columns aligned, trailing spaces stripped."""
    cells = [[one_line(c) for c in columns], *([one_line(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns) - 1)]
    for row in cells:
        padded = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        yield GAP.join([*padded, row[-1]]).rstrip()
