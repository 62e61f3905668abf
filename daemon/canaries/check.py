"""The ``engine_output`` check: the canaries' verdict on the engine serving now, as a check.

On these rigs the worst failures are silent: an engine that mangles identifiers or leaks
tool calls as raw markup answers ``/health`` with 200. The canaries catch it; as a check
their verdict reaches ``overall`` (the banner, ``fleetctl status``'s exit code, Nagios),
the failed-checks list with its remedy, and the check history.

Only verdicts on the engine run serving now count (judged since it reached ready): a
restarted engine is not blamed for its predecessor, and a stopped one is judged by the
serving state instead. Canary alerts come from the canary events (``canary:<name>``), so
alerting leaves this check's transitions out, and the start gate ignores it: a person must
be able to restart the engine to test a fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from daemon.store import CanaryRow
from hwcheck.model import CheckResult, Severity
from serving.canary.model import Outcome

CHECK_ID = "engine_output"


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


def _figure(row: CanaryRow) -> str:
    if row.figure is None:
        return ""
    unit = f" {row.unit}" if row.unit and row.unit != "ratio" else ""
    shown = f"{row.figure:.0%}" if row.unit == "ratio" else f"{row.figure:g}{unit}"
    return f" ({shown})"


def engine_output_check(
    judged: Sequence[CanaryRow],
    serving: dict[str, Any],
    also_current: Sequence[CanaryRow] = (),
) -> CheckResult:
    """The worst canary verdict on the engine run serving now (``ok`` when none failed).

    ``also_current`` are verdicts judged current by another rule (the deep canaries'
    verdicts on the build serving now, from before this run).
    """
    since = _ready_since(serving)
    if since is None:
        return CheckResult(
            CHECK_ID, None, Severity.OK, "the engine is not serving: canaries judge it once ready"
        )
    current = [row for row in judged if row.ts >= since] + list(also_current)
    if not current:
        return CheckResult(
            CHECK_ID, None, Severity.OK, "no canary round has judged this engine run yet"
        )
    bad = [row for row in current if row.result in (Outcome.WARN, Outcome.FAIL)]
    if not bad:
        return CheckResult(
            CHECK_ID, None, Severity.OK, f"{len(current)} canaries pass on the serving engine"
        )
    bad.sort(key=lambda row: Outcome(row.result).severity.rank, reverse=True)
    worst = Outcome(bad[0].result).severity
    message = "; ".join(f"{row.name} {row.result}{_figure(row)}: {row.message}" for row in bad)
    return CheckResult(CHECK_ID, None, worst, message, bad[0].advice)
