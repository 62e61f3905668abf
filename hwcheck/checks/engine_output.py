"""``engine_output``: the canaries' verdict on the engine serving now, as a check.

On these rigs the worst failures are silent: an engine that mangles identifiers or leaks
tool calls as raw markup answers ``/health`` with 200. The canaries catch it; as a check
their verdict reaches ``overall`` (the banner, ``fleetctl status``'s exit code, Nagios),
the failed-checks list with its remedy, and the check history.

Only verdicts on the engine run serving now count (judged since it reached ready), and the
deep canaries' verdicts on the build serving now (``also_current``): a restarted engine is
not blamed for its predecessor, and a stopped one is judged by the
serving state instead. Canary alerts come from the canary events (``canary:<name>``), so
alerting leaves this check's transitions out, and the start gate ignores it: a person must
be able to restart the engine to test a fix. fleetd's canary runner keeps the reading
(``readings.canaries``; none on a rig without an engine).
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput
from hwcheck.checks.readings import CanaryReading, CanaryVerdict
from hwcheck.checks.spec import CheckSpec, CheckText
from hwcheck.model import CheckResult, Severity

CHECK_ID = "engine_output"


def check(inp: CheckInput) -> list[CheckResult]:
    """The registry's entry: one rig-wide result when the rig has canaries."""
    reading = inp.readings.canaries
    return [] if reading is None else [judge(reading)]


def _figure(verdict: CanaryVerdict) -> str:
    if verdict.figure is None:
        return ""
    unit = f" {verdict.unit}" if verdict.unit and verdict.unit != "ratio" else ""
    ratio = verdict.unit == "ratio"
    shown = f"{verdict.figure:.0%}" if ratio else f"{verdict.figure:g}{unit}"
    return f" ({shown})"


def judge(reading: CanaryReading) -> CheckResult:
    """The worst canary verdict of every engine's run serving now (``ok`` when none failed).

    With several engines each is judged alone (its own run, its own ready time); the
    result is the worst, its message naming each engine that failed (``engine NAME: ``,
    the primary's as on a one-engine rig), the advice the worst one's.
    """
    if not reading.others:
        return _judge_one(reading)
    judged: list[tuple[str | None, CheckResult]] = [(None, _judge_one(reading))]
    judged += [(name, _judge_one(other)) for name, other in reading.others]
    bad = [(name, result) for name, result in judged if result.severity is not Severity.OK]
    shown = bad or judged
    if bad:
        bad.sort(key=lambda item: item[1].severity.rank, reverse=True)
    message = "; ".join(
        result.message if name is None else f"engine {name}: {result.message}"
        for name, result in shown
    )
    worst = shown[0][1]
    return CheckResult(CHECK_ID, None, worst.severity, message, worst.remedy)


def _judge_one(reading: CanaryReading) -> CheckResult:
    """The worst canary verdict on one engine's run serving now."""
    since = reading.ready_since
    if since is None:
        return CheckResult(
            CHECK_ID, None, Severity.OK, "the engine is not serving: canaries judge it once ready"
        )
    current = [v for v in reading.verdicts if v.ts >= since] + list(reading.also_current)
    if not current:
        return CheckResult(
            CHECK_ID, None, Severity.OK, "no canary round has judged this engine run yet"
        )
    bad = [v for v in current if v.severity is not Severity.OK]
    if not bad:
        return CheckResult(
            CHECK_ID, None, Severity.OK, f"{len(current)} canaries pass on the serving engine"
        )
    bad.sort(key=lambda v: v.severity.rank, reverse=True)
    message = "; ".join(f"{v.name} {v.result}{_figure(v)}: {v.message}" for v in bad)
    return CheckResult(CHECK_ID, None, bad[0].severity, message, bad[0].advice)


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "engine output wrong",
        "The canaries check what the engine says: mangled identifiers, tool calls leaked as "
        "DSML markup, reasoning in the wrong field, a quarter of the throughput. /health "
        "says 200 through all of these.",
        "the failing canary's advice (fleetctl canary status): the build's kernels or "
        "parser patches, the parser flags, or the power brake for the throughput.",
    ),
    alert=None,  # alerts through its own events
)
