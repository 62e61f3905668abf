"""The policy as the supervisor's advisor: an engine exit in, a restart/hold/stay verdict out.

The supervisor reports each run that ended on its own (``serving.runtime.exit_advice``);
this module turns the report into facts, asks ``decide`` and maps the decision to the
verdict the supervisor carries out. ``PolicyAdvisor`` is the pure part (what a test of the
supervisor alone uses); the daemon adds what only it knows (the latch, critical checks,
Xids read up to the present) through ``extra_facts`` and records each decision.
"""

from __future__ import annotations

from collections.abc import Callable

from recovery.decisions import (
    AdviseInspection,
    Decision,
    Hold,
    NoAction,
    Refuse,
    RestartAfter,
    Start,
    StopAndLatch,
)
from recovery.facts import EngineExit, Facts, PolicySettings, Trigger
from recovery.policy import decide
from serving.runtime.exit_advice import (
    ExitReport,
    ExitVerdict,
    HoldEngine,
    LeaveStopped,
    RestartIn,
)
from serving.settings import RecoverySettings


def policy_settings(
    recovery: RecoverySettings, *, autostart: bool = True, restart_on_failure: bool = True
) -> PolicySettings:
    """The policy's knobs from ``[recovery]`` (and ``[serving] autostart``)."""
    return PolicySettings(
        autostart=autostart,
        restart_on_failure=restart_on_failure,
        backoff_base_s=recovery.backoff_base_s,
        backoff_max_s=recovery.backoff_max_s,
        breaker_max_restarts=recovery.breaker_max_restarts,
        breaker_window_s=recovery.breaker_window_s,
    )


def exit_facts(report: ExitReport, settings: PolicySettings) -> Facts:
    """The facts of one ended run, as far as the supervisor knows them."""
    return Facts(
        trigger=Trigger.ENGINE_EXIT,
        engine_exit=EngineExit(
            crash_class=report.crash_class,
            exit_code=report.exit_code,
            signal=report.signal,
            description=report.description,
        ),
        restart_times_s=report.restart_times_s,
        failures_in_a_row=report.failures_in_a_row,
        settings=settings,
    )


def verdict_for(decision: Decision) -> ExitVerdict:
    """What the supervisor does with ``decision`` after an exit."""
    match decision:
        case RestartAfter():
            return RestartIn(decision.delay_s, decision.failure_in_a_row, decision.reason)
        case Hold():
            return HoldEngine(decision.reason)
        case StopAndLatch():
            return LeaveStopped(f"{decision.reason}; reboot required: {decision.advice_text}")
        case Refuse():
            return LeaveStopped(
                "not restarted: " + "; ".join(reason.message for reason in decision.reasons)
            )
        case NoAction() | AdviseInspection() | Start():
            return LeaveStopped(decision.reason)


class PolicyAdvisor:
    """``ExitAdvisor`` backed by ``decide``; ``extra_facts`` adds the daemon's knowledge."""

    def __init__(
        self,
        settings: PolicySettings,
        extra_facts: Callable[[Facts], Facts] | None = None,
    ) -> None:
        self._settings = settings
        self._extra_facts = extra_facts or (lambda facts: facts)

    def decision(self, report: ExitReport) -> Decision:
        """The policy's decision on ``report`` (with the daemon's extra facts)."""
        return decide(self._extra_facts(exit_facts(report, self._settings)), report.now_s)

    def __call__(self, report: ExitReport) -> ExitVerdict:
        """The supervisor's question: what now?"""
        return verdict_for(self.decision(report))
