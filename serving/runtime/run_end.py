"""How one run of the engine ends: stops we asked for, exits we did not, and what follows.

A stop we asked for ends where its plan says (stopped, backoff then restart, or start
again). An exit we did not ask for is classified from the log's tail and the exit status
(``classify``), recorded, and followed by a restart with backoff unless the breaker holds
the engine for a person.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from hwcheck.model import Severity
from serving.runtime.classify import CrashClass, explain_exit, split_returncode
from serving.runtime.exit_advice import ExitVerdict, HoldEngine, LeaveStopped, RestartIn
from serving.runtime.launchers import LauncherError
from serving.runtime.machine_core import LOG, MachineCore, utcnow
from serving.runtime.states import ServingChange, ServingState, StartRefused, StartResult
from serving.runtime.stopping import (
    AfterStop,
    BackoffThenRestart,
    StartAgain,
    StayStopped,
    StopPlan,
)


class RunEnding(MachineCore):
    """Stops, exits, crash classification, backoff and the breaker."""

    def start(self) -> StartResult:
        """A person's start (``ServingMachine`` carries it out)."""
        raise NotImplementedError

    def _begin_stop(
        self, reason: str, final_reason: str, then: AfterStop, waiter: Future[Any] | None = None
    ) -> None:
        handle = self._handle
        plan = StopPlan(reason=reason, final_reason=final_reason, then=then)
        if waiter is not None:
            plan.waiters.append(waiter)
        self._backoff_until = None
        self._stop_plan = plan
        if handle is None:
            self._finish_stop(plan)
            return
        plan.deadline = self._clock() + self._serving.stop_timeout_s
        self._set_state(ServingState.STOPPING, reason)
        try:
            self._launcher.signal_stop(handle, graceful=True)
        except LauncherError as exc:
            self._stop_failed(f"cannot signal the engine: {exc}")

    def _stop_failed(self, reason: str) -> None:
        plan = self._stop_plan
        self._stop_plan = None
        self._set_state(ServingState.FAILED, reason, severity=Severity.CRITICAL)
        self._emit(ServingChange.STOP_STUCK, Severity.CRITICAL, reason, launch=self._launch_record)
        if plan is not None:
            plan.settle()

    def _finish_stop(self, plan: StopPlan) -> None:
        """The engine ended after we asked it to: go where the plan says."""
        self._stop_plan = None
        match plan.then:
            case BackoffThenRestart(cause=cause):
                self._schedule_restart(cause)
            case StartAgain():
                self._set_state(ServingState.STOPPED, "restarting by request")
                try:
                    result = self.start()
                except StartRefused as refused:
                    plan.fail(refused)
                    return
                plan.settle(result)
                return
            case StayStopped():
                self._set_state(ServingState.STOPPED, plan.final_reason)
        plan.settle()

    def _engine_ended(self) -> None:
        handle = self._handle
        if handle is None:
            return
        try:
            exit_code, signal = split_returncode(self._launcher.exit_code(handle))
        except LauncherError as exc:
            LOG.warning("engine exit code unknown: %s", exc)
            exit_code, signal = None, None
        self._capture.poll()  # after exit_code: a launcher may add its verdict to the log
        survivors = self._launcher.survivors(handle)
        self._gate.note_survivors(survivors)
        self._launcher.release(handle)
        self._handle = None
        self._health.detach()
        how = _describe_exit(exit_code, signal)
        plan = self._stop_plan
        if survivors:
            self._warn(
                f"{len(survivors)} process(es) of the engine's group still run after it ended "
                f"(pids {', '.join(map(str, survivors))}): they may hold GPU memory"
            )
        if plan is not None or self._state is ServingState.FAILED:
            reason = plan.reason if plan is not None else "exited after the stop was reported stuck"
            self._end_launch(exit_code, signal, None, f"stopped ({reason}); {how}")
            if plan is not None:
                self._finish_stop(plan)
            else:
                self._set_state(
                    ServingState.STOPPED, f"engine {how} after the stop was reported stuck"
                )
            return
        verdict = explain_exit(
            self._capture.session_tail(self._tuning.classify_tail_lines), exit_code, signal
        )
        self._crash_class = verdict.crash_class
        phase = "while starting" if self._state is ServingState.STARTING else "while serving"
        message = f"engine {how} {phase}: {verdict.crash_class}"
        if verdict.evidence:
            message += f" ({verdict.evidence})"
        self._end_launch(exit_code, signal, verdict.crash_class, message)
        self._emit(
            ServingChange.CRASH,
            Severity.CRITICAL
            if verdict.crash_class is not CrashClass.UNKNOWN
            else Severity.WARNING,
            message,
            crash_class=verdict.crash_class,
            evidence=verdict.evidence,
            advice=verdict.advice,
            launch=self._launch_record,
        )
        self._schedule_restart(
            f"engine {how}: {verdict.crash_class}",
            crash_class=str(verdict.crash_class),
            exit_code=exit_code,
            signal=signal,
        )

    def _end_launch(
        self, exit_code: int | None, signal: int | None, crash: CrashClass | None, reason: str
    ) -> None:
        if self._launch_record is None:
            return
        self._launch_record = replace(
            self._launch_record,
            ended_at=utcnow(),
            exit_code=exit_code,
            signal=signal,
            crash_class=crash,
            end_reason=reason,
        )
        self._emit(
            ServingChange.LAUNCH,
            Severity.OK,
            f"engine launch ended: {reason}",
            launch=self._launch_record,
        )

    def _schedule_restart(
        self,
        reason: str,
        *,
        crash_class: str | None = None,
        exit_code: int | None = None,
        signal: int | None = None,
    ) -> None:
        """Ask the recovery policy what follows an ended run, and do it."""
        now = self._clock()
        report = self.book.report(
            now, reason, crash_class=crash_class, exit_code=exit_code, signal=signal
        )
        try:
            verdict: ExitVerdict = self._advise(report)
        except Exception as exc:  # no answer is no licence to restart: stay down, say why
            LOG.exception("the recovery policy failed on an engine exit")
            verdict = LeaveStopped(f"{reason}; not restarted: the recovery policy failed ({exc})")
        self.book.note_verdict(verdict)
        match verdict:
            case HoldEngine(reason=held):
                self._set_state(ServingState.HELD, held, severity=Severity.CRITICAL)
                self._emit(ServingChange.BREAKER, Severity.CRITICAL, held)
            case RestartIn(delay_s=delay_s, reason=why):
                self._backoff_until = now + delay_s
                self._set_state(ServingState.BACKOFF, why)
            case LeaveStopped(reason=why):
                self._backoff_until = None
                self._set_state(ServingState.STOPPED, why)


def _describe_exit(exit_code: int | None, signal: int | None) -> str:
    if signal is not None:
        return f"was killed by signal {signal}"
    if exit_code is not None:
        return f"exited with code {exit_code}"
    return "ended (exit status unknown)"
