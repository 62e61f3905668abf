"""The order in which xdist hands the suite's files to its workers.

``scripts/dev test`` runs whole files on ten workers (``--dist loadfile
--no-loadscope-reorder``): each worker takes the next file in collection order when it is
done. The long files go out first, longest first (``pytest.mark.slow(seconds=N)``: about
how long the file takes on a quiet 2-core machine), so none starts late and runs on alone
after the others are done; the rest follow in collection order. Four long files were not
marked at first, the longest of the suite (87 s) among them: any could have started last.

Tried and not kept: four quick files after each long one, so the end-to-end files' waits
would overlap the unit files' computing. 225 s of pytest either way with eight workers: the
machine stayed 40-65% busy through the long files, which wait on each other's daemons more
than on the CPU. A stale ``seconds`` only costs order, never a result.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

SECONDS_UNSAID = 10.0  # a ``slow`` marker without ``seconds``


class _Marker(Protocol):
    kwargs: dict[str, object]


class Item(Protocol):
    """What the order needs of a pytest item."""

    path: Path

    def get_closest_marker(self, name: str) -> _Marker | None: ...


def file_seconds(items: Iterable[Item]) -> dict[Path, float | None]:
    """Each file in collection order, with its ``slow`` seconds (None: not a long file)."""
    seconds: dict[Path, float | None] = {}
    for item in items:
        marker = item.get_closest_marker("slow")
        said = None
        if marker is not None:
            value = marker.kwargs.get("seconds", SECONDS_UNSAID)
            said = float(value) if isinstance(value, int | float) else SECONDS_UNSAID
        known = seconds.get(item.path)
        seconds[item.path] = said if known is None else max(known, said or 0.0)
    return seconds


def in_run_order(items: Sequence[Item]) -> list[Item]:
    """``items`` with the long files first, longest first; the others as collected.

    Python's sort is stable and a file's items share one key, so each file stays whole and
    in its own order.
    """
    seconds = file_seconds(items)

    def key(item: Item) -> tuple[bool, float]:
        said = seconds[item.path]
        return (said is None, -(said or 0.0))

    return sorted(items, key=key)
