"""Lists that fit the terminal (``events``, ``alerts``, ``profiles``, ``fleet status``): the
columns that matter kept, the text wrapped between words, nothing cut, a pipe unchanged."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from daemon.cli.rig.status import EVENT_COLUMNS
from daemon.cli.views.listview import ListColumn, list_lines, short_time
from daemon.cli.views.screen import Piece, plain

REFUSAL = (
    "refuse: host_kernel: running kernel 6.8.0-49-generic, not the baseline "
    "6.8.12-cmp-bar1: the rig booted another kernel (what to do: reboot into it)"
)
NEW_CARD = "new card GPU-b7a593fa-fead-5fcf-99ca-0123456789ab (NVIDIA CMP 170HX) as card 2"


def event(n: int, message: str, card: str = "-") -> list[Piece]:
    return [Piece(str(n)), Piece("12-04 17:27:35"), Piece("recovery"), Piece("critical"),
            Piece(card), Piece("-"), Piece(message)]  # fmt: skip


def words(text: str) -> set[str]:
    return set(text.split())


@pytest.mark.parametrize("width", [60, 80, 100, 132])
def test_no_word_is_cut_and_every_word_is_there(width: int) -> None:
    rows = [event(1, REFUSAL), event(2, NEW_CARD, "2"), event(3, "engine ready (pid 28413)")]
    text = plain(list_lines(EVENT_COLUMNS, rows, width))

    assert max(len(line) for line in text.splitlines()) <= width
    assert "…" not in text
    for row in rows:
        assert words(row[-1].text) <= words(text)  # every word whole, none split
    assert "critical" in text and "12-04 17:27:35" in text  # the columns that matter


def test_at_80_columns_the_first_ranks_stay_in_the_row_and_a_short_text_beside() -> None:
    lines = plain(list_lines(EVENT_COLUMNS, [event(7, "engine ready (pid 28413)", "1")], 80))
    header, row = lines.splitlines()

    assert header.split() == ["id", "time", "kind", "severity", "card", "message"]
    assert row.split() == ["7", "12-04", "17:27:35", "recovery", "critical", "1", "engine",
                           "ready", "(pid", "28413)"]  # fmt: skip


def test_a_long_text_goes_under_its_row_at_the_full_width() -> None:
    lines = plain(list_lines(EVENT_COLUMNS, [event(1, REFUSAL)], 80)).splitlines()

    assert lines[1].rstrip().endswith("critical     -")
    assert lines[2].startswith("    refuse: host_kernel:")
    assert all(line.startswith("    ") for line in lines[2:])


def test_a_column_marked_below_is_always_on_its_own_line() -> None:
    columns = [ListColumn("id", 0), ListColumn("summary", flex=True),
               ListColumn("delivery", below=True)]  # fmt: skip
    rows = [[Piece("5"), Piece("Power brake on cards 0-3"), Piece("json: delivered")]]

    text = plain(list_lines(columns, rows, 80))

    assert text.splitlines()[-1] == "    delivery: json: delivered"


def test_into_a_pipe_a_row_is_one_line_with_every_column() -> None:
    rows = [event(1, REFUSAL), event(2, NEW_CARD)]
    lines = plain(list_lines(EVENT_COLUMNS, rows, None)).splitlines()

    assert len(lines) == 3
    assert lines[0].split() == ["id", "time", "kind", "severity", "card", "xid", "message"]
    assert lines[1].endswith(REFUSAL)


def test_short_times_are_local_to_the_second() -> None:
    stamp = datetime(2026, 12, 4, 17, 27, 35, 123456, tzinfo=UTC)
    local = stamp.astimezone()
    assert short_time(stamp.isoformat()) == local.strftime("%m-%d %H:%M:%S")
    assert short_time("not a time") == "not a time"
    assert short_time(None) == "-"
