"""The moments the dashboard's charts mark on their time axis: Xids, latches, reboots.

A brake or a wedge is read against what happened when: a power cliff right after an Xid
31, a latch, then the reboot that cleared it. The store's events already say so; this
picks the three kinds of moment out of them (newest first in the store, oldest first
here, as a chart draws them), so the browser never parses event messages.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from daemon.store import Store
from daemon.store.events import EventRow
from hwcheck.model import EventKind

# Each kind's newest markers in a window; a storm of Xids past this is one thick band anyway.
MAX_PER_KIND = 200


def _xid(row: EventRow) -> dict[str, Any] | None:
    if row.xid is None:
        return None
    where = "" if row.card is None else f" on card {row.card}"
    return {"kind": "xid", "label": f"Xid {row.xid}", "title": f"Xid {row.xid}{where}"}


def _latch(row: EventRow) -> dict[str, Any] | None:
    """A recovery event of the decision that set the latch (a dry run sets none)."""
    details = row.details or {}
    if details.get("action") != "stop_and_latch" or details.get("dry_run"):
        return None
    return {"kind": "latch", "label": "latch", "title": row.message}


def _reboot(row: EventRow) -> dict[str, Any] | None:
    """The new boot itself, not the latch clearing recorded beside it."""
    if not row.is_new_boot:
        return None
    return {"kind": "reboot", "label": "reboot", "title": row.message}


PICKERS = {EventKind.XID: _xid, EventKind.RECOVERY: _latch, EventKind.REBOOT: _reboot}


def _picked(store: Store, since: datetime, until: datetime) -> Iterator[dict[str, Any]]:
    for kind, pick in PICKERS.items():
        for row in store.list_events(since, kind.value, MAX_PER_KIND, until=until):
            marker = pick(row)
            if marker is not None:
                yield {"ts_s": round(row.ts.timestamp(), 3), "card": row.card, **marker}


def chart_markers(store: Store, since: datetime, until: datetime) -> list[dict[str, Any]]:
    """``{ts_s, kind, label, title, card}`` per Xid, latch and reboot in the window, oldest first."""
    return sorted(_picked(store, since, until), key=lambda marker: marker["ts_s"])
