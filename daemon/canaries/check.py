"""The canaries' reading for the ``engine_output`` check, and when a verdict is stale.

The check itself is pure and lives with the others (``hwcheck.checks.engine_output``);
this turns the runner's judged rows and the engine's serving status into its reading:
each verdict with the severity its result maps to, and since when the engine serves.
A verdict from before the current run (or with the engine not ready) is ``stale``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from daemon.store import CanaryRow
from hwcheck.checks.readings import CanaryReading, CanaryVerdict
from serving.canary.model import Outcome

STALE = "stale"


def _ready_since(serving: dict[str, Any]) -> datetime | None:
    if serving.get("state") != "ready" or not serving.get("since"):
        return None
    try:
        return datetime.fromisoformat(str(serving["since"]))
    except ValueError:
        return None


def is_stale(ts: datetime, serving: dict[str, Any]) -> bool:
    """A verdict from before the engine's current run, or with the engine not ready.

    Such a verdict says nothing about what serves now (an Xid stop leaves the last
    round's ``pass`` behind): it is shown as ``stale``, never as its old result.
    """
    since = _ready_since(serving)
    return since is None or ts < since


def _verdict(row: CanaryRow) -> CanaryVerdict:
    return CanaryVerdict(
        name=row.name,
        result=row.result,
        severity=Outcome(row.result).severity,
        figure=row.figure,
        unit=row.unit,
        message=row.message,
        advice=row.advice,
        ts=row.ts,
    )


def canary_reading(
    judged: Sequence[CanaryRow],
    serving: dict[str, Any],
    also_current: Sequence[CanaryRow] = (),
) -> CanaryReading:
    """The ``engine_output`` check's reading: the judged rows and the serving engine's start.

    ``also_current`` are verdicts judged current by another rule (the deep canaries'
    verdicts on the build serving now, from before this run).
    """
    return CanaryReading(
        ready_since=_ready_since(serving),
        verdicts=tuple(_verdict(row) for row in judged),
        also_current=tuple(_verdict(row) for row in also_current),
    )
