"""Stopping an engine: the plan of one stop and its escalation, SIGINT to SIGTERM (to SIGKILL).

A stop sends SIGINT (vLLM's stop signal) and waits ``stop_timeout_s``; then SIGTERM and
waits again; then, only with ``allow_kill``, SIGKILL. Without ``allow_kill`` a stop that
does not take is reported stuck ("reboot recommended") and nothing is killed. The plan
also says, as typed data, what follows once the engine has ended.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from hwcheck.model import Severity
from serving.runtime.launchers import EngineHandle, Launcher, LauncherError
from serving.runtime.start_kind import StartFor
from serving.settings import ServingSettings, SupervisorTuning


@dataclass(frozen=True)
class StayStopped:
    """The stop is final: the state becomes ``stopped`` with the plan's final reason."""


@dataclass(frozen=True)
class ReportEnd:
    """The engine was unhealthy: once stopped, report the ended run (``cause`` says why)."""

    cause: str


@dataclass(frozen=True)
class StartAgain:
    """A restart by request: start once the engine has stopped (as ``kind`` says)."""

    kind: StartFor = StartFor.PERSON


AfterStop = StayStopped | ReportEnd | StartAgain


class StopPhase(enum.Enum):
    """The last signal sent."""

    GRACEFUL = "SIGINT"
    TERM = "SIGTERM"
    KILL = "SIGKILL"


@dataclass
class StopPlan:
    """A stop in progress: which signal was sent, until when to wait, what comes after."""

    reason: str
    final_reason: str
    then: AfterStop
    phase: StopPhase = StopPhase.GRACEFUL
    deadline: float = 0.0
    waiters: list[Future[Any]] = field(default_factory=list)

    def settle(self, result: object = None) -> None:
        """Answer everyone waiting on this stop."""
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(result)

    def fail(self, error: BaseException) -> None:
        """Answer everyone waiting on this stop with ``error``."""
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_exception(error)


Warn = Callable[[Severity, str], None]


def term_timeout_s(serving: ServingSettings, tuning: SupervisorTuning) -> float:
    """How long to wait after SIGTERM."""
    return serving.stop_timeout_s if tuning.term_timeout_s is None else tuning.term_timeout_s


def escalate(
    plan: StopPlan,
    handle: EngineHandle,
    launcher: Launcher,
    now: float,
    serving: ServingSettings,
    tuning: SupervisorTuning,
    warn: Warn,
) -> str | None:
    """The next step of a stop whose deadline passed; the reason when the stop is stuck."""
    term_s = term_timeout_s(serving, tuning)
    try:
        if plan.phase is StopPhase.GRACEFUL:
            plan.phase = StopPhase.TERM
            plan.deadline = now + term_s
            warn(
                Severity.WARNING,
                f"engine (pid {handle.pid}) still runs {serving.stop_timeout_s:g} s after "
                "SIGINT: sending SIGTERM",
            )
            launcher.signal_stop(handle, graceful=False)
        elif plan.phase is StopPhase.TERM and serving.allow_kill:
            plan.phase = StopPhase.KILL
            plan.deadline = now + tuning.kill_wait_s
            warn(
                Severity.CRITICAL,
                f"engine (pid {handle.pid}) ignored SIGINT and SIGTERM: sending SIGKILL "
                "(allow_kill); stranded CUDA contexts may need a reboot",
            )
            launcher.kill(handle)
        elif plan.phase is StopPhase.TERM:
            return (
                f"stop stuck: reboot recommended (engine pid {handle.pid} ignored SIGINT "
                f"and SIGTERM for {serving.stop_timeout_s + term_s:g} s; nothing was killed)"
            )
        else:
            return f"stop stuck: reboot required (engine pid {handle.pid} survived SIGKILL)"
    except LauncherError as exc:
        return f"cannot signal the engine: {exc}"
    return None
