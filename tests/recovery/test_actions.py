"""Recovery's audit actions and refusal codes: one row per member, and the wings derive.

A new ``Action`` or ``RefusalCode`` without its row fails here; the daemon's lists (the
status's decisions, the audit severities, the alert rules' covered actions and
self-alerting codes) are the tables' columns, never a second list.
"""

from __future__ import annotations

from daemon.alerts import recovery_rules
from daemon.ports import parts
from hwcheck.model import Advice, Severity
from recovery import executors
from recovery.actions import (
    ACTIONS,
    OWN_ALERT,
    REFUSALS,
    SHOWN_IN_STATUS,
    Action,
    RefusalCode,
    refusal_code,
    severity_of,
)
from recovery.decisions import (
    AdviseInspection,
    Hold,
    NoAction,
    Reason,
    Refuse,
    RestartAfter,
    Start,
    Stop,
    StopAndHold,
    StopAndLatch,
)
from recovery.facts import STARTS
from serving.runtime.start_kind import StartFor


def test_every_action_and_every_refusal_code_has_its_row() -> None:
    assert set(ACTIONS) == set(Action)
    assert set(REFUSALS) == set(RefusalCode)


def test_every_decision_kind_is_an_action_with_a_row() -> None:
    kinds = [
        StopAndLatch("x", Advice.WARM_REBOOT),
        StopAndHold("x"),
        RestartAfter(1.0, 1, "x"),
        Start("x"),
        Stop("x"),
        Hold("x"),
        Refuse((Reason(RefusalCode.LINT, "x"),)),
        AdviseInspection("x"),
        NoAction("x"),
    ]
    for decision in kinds:
        action, _ = executors.describe(decision)
        assert isinstance(action, Action) and action in ACTIONS


def test_a_canary_hold_is_one_of_the_decisions_the_status_shows() -> None:
    assert Action.STOP_AND_HOLD in SHOWN_IN_STATUS
    assert parts.RECOVERY_ACTIONS == SHOWN_IN_STATUS


def test_the_alert_rules_read_the_tables() -> None:
    assert (
        recovery_rules.COVERED_RECOVERY_ACTIONS
        == OWN_ALERT
        == {
            Action.STOP_AND_LATCH,
            Action.HOLD,
            Action.RESTART_AFTER,
        }
    )
    assert {
        RefusalCode.WARNING_CHECK,
        RefusalCode.CRITICAL_CHECK,
        RefusalCode.FOREIGN_GPU_PROCESSES,
        RefusalCode.GPUS_HELD,
        RefusalCode.REBOOT_LATCH,
    } == recovery_rules.SELF_ALERTING


def test_severity_comes_from_the_row_else_from_the_warnings() -> None:
    assert severity_of(Action.STOP_AND_LATCH, warned=False) is Severity.CRITICAL
    assert severity_of("hold", warned=False) is Severity.CRITICAL
    assert severity_of(Action.START, warned=False) is Severity.INFO
    assert severity_of(Action.START, warned=True) is Severity.WARNING
    assert severity_of("apply_power_cap", warned=False) is Severity.INFO  # not recovery's


def test_a_recorded_code_reads_back_as_its_member() -> None:
    assert refusal_code("reboot_latch") is RefusalCode.REBOOT_LATCH
    assert refusal_code("no_such_code") is None


def test_each_start_trigger_says_who_the_start_is_for() -> None:
    assert set(executors._START_KINDS) == STARTS
    assert set(executors._START_KINDS.values()) <= set(StartFor)


def test_every_code_coined_as_a_string_below_recovery_is_a_member() -> None:
    """The supervisor (``serving``) cannot import recovery: its codes are listed here too."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    coined = set()
    for package in ("serving", "daemon", "recovery"):
        for path in (root / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "id", None) in {"Refusal", "Reason"}
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    coined.add(node.args[0].value)
    assert coined, "no code coined as a string found: the scan is broken"
    assert coined <= {code.value for code in RefusalCode}
