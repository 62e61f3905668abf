"""The ``engine_output`` check from canary verdicts: worst wins, only the serving run counts.

The canaries' reading (``daemon.canaries.check``) judged by the registry's pure check.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from daemon.canaries.check import canary_reading
from daemon.store import CanaryRow
from hwcheck.checks import engine_output
from hwcheck.model import CheckResult, Severity

READY = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
SERVING = {"state": "ready", "since": READY.isoformat(), "pid": 7, "url": "http://127.0.0.1:1"}


def row(name: str, result: str, *, after_s: float = 60, **more: Any) -> CanaryRow:
    fields: dict[str, Any] = {
        "id": 1,
        "ts": READY + timedelta(seconds=after_s),
        "name": name,
        "result": result,
        "figure": None,
        "unit": "",
        "message": f"{name} said {result}",
        "advice": f"fix {name}",
        "duration_s": 1.0,
    }
    fields.update(more)
    return CanaryRow(**fields)


def engine_output_check(judged: list[CanaryRow], serving: dict[str, Any]) -> CheckResult:
    return engine_output.judge(canary_reading(judged, serving))


def test_all_passing_is_ok() -> None:
    check = engine_output_check([row("copy_fidelity", "pass"), row("tool_calls", "pass")], SERVING)
    assert check.severity is Severity.OK
    assert check.id == "engine_output" and check.card is None
    assert check.message == "2 canaries pass on the serving engine"


def test_the_worst_verdict_wins_and_its_advice_is_the_remedy() -> None:
    judged = [
        row("reasoning_field", "warn"),
        row("copy_fidelity", "fail", figure=0.78, unit="ratio"),
        row("throughput", "pass", figure=98.1, unit="tok/s"),
    ]
    check = engine_output_check(judged, SERVING)
    assert check.severity is Severity.CRITICAL
    assert check.message == (
        "copy_fidelity fail (78%): copy_fidelity said fail; "
        "reasoning_field warn: reasoning_field said warn"
    )
    assert check.remedy == "fix copy_fidelity"


def test_a_warning_alone_is_a_warning() -> None:
    judged = [row("throughput", "warn", figure=24.5, unit="tok/s")]
    check = engine_output_check(judged, SERVING)
    assert check.severity is Severity.WARNING
    assert check.message.startswith("throughput warn (24.5 tok/s): ")


def test_verdicts_from_before_this_engine_run_do_not_count() -> None:
    check = engine_output_check([row("copy_fidelity", "fail", after_s=-5)], SERVING)
    assert check.severity is Severity.OK
    assert check.message == "no canary round has judged this engine run yet"


def test_an_engine_not_serving_is_not_judged_by_its_canaries() -> None:
    for state in ("stopped", "starting", "backoff", "held"):
        check = engine_output_check([row("copy_fidelity", "fail")], {**SERVING, "state": state})
        assert check.severity is Severity.OK, state
        assert "not serving" in check.message


def test_a_side_engines_failure_moves_the_check_and_names_that_engine() -> None:
    """Several engines (``[serving] run``): each judged on its own run, the worst wins."""
    primary = canary_reading([row("copy_fidelity", "pass")], SERVING)
    side_ready = READY + timedelta(minutes=5)
    side_serving = {**SERVING, "since": side_ready.isoformat(), "pid": 8}
    failing = canary_reading(
        [row("copy_fidelity", "fail", after_s=400, figure=0.4, unit="ratio")], side_serving
    )
    check = engine_output.judge(replace(primary, others=(("high", failing),)))
    assert check.severity is Severity.CRITICAL
    assert check.message == "engine high: copy_fidelity fail (40%): copy_fidelity said fail"
    assert check.remedy == "fix copy_fidelity"
    # The side engine's verdict from before its own ready does not count for its new run.
    old = canary_reading([row("copy_fidelity", "fail", after_s=60)], side_serving)
    assert engine_output.judge(replace(primary, others=(("high", old),))).severity is Severity.OK
    # A side engine that is not serving is judged by its serving state, never blamed here.
    stopped = canary_reading([row("copy_fidelity", "fail")], {"state": "stopped"})
    calm = engine_output.judge(replace(primary, others=(("high", stopped),)))
    assert calm.severity is Severity.OK
    assert calm.message.startswith("1 canaries pass on the serving engine; engine high: ")
    # One engine: the message reads as it always did.
    assert engine_output.judge(primary).message == "1 canaries pass on the serving engine"
