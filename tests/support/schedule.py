"""The order in which xdist hands the suite's files to its workers.

``scripts/dev test`` runs whole files on ten workers (``--dist loadfile
--no-loadscope-reorder``): each worker takes the next file in collection order when it is
done. Two rules make that order short on two cores:

- the long files start first, longest first (``pytest.mark.slow(seconds=N)``: about how
  long the file takes on a quiet 2-core machine), so none starts last and runs on alone;
- between two long files come ``FAST_PER_SLOW`` of the others. The long files are
  end-to-end ones that mostly wait on real daemons and engines, the others mostly compute:
  with the long files all first the machine idled at 40-65% busy through the first two
  minutes and was CPU-bound through the rest; mixed, the waits overlap the computing.

A stale ``seconds`` only costs order, never a result.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Protocol

FAST_PER_SLOW = 4
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


def file_order(seconds: dict[Path, float | None]) -> list[Path]:
    """The long files longest first, each followed by ``FAST_PER_SLOW`` others in order."""
    slow = sorted(
        (path for path, said in seconds.items() if said is not None),
        key=lambda path: -(seconds[path] or 0.0),
    )
    fast: Iterator[Path] = iter(path for path, said in seconds.items() if said is None)
    order: list[Path] = []
    for path in slow:
        order.append(path)
        order.extend(islice(fast, FAST_PER_SLOW))
    order.extend(fast)
    return order


def in_run_order(items: Sequence[Item]) -> list[Item]:
    """``items`` by ``file_order``, each file's own order kept."""
    rank = {path: number for number, path in enumerate(file_order(file_seconds(items)))}
    return sorted(items, key=lambda item: rank[item.path])
