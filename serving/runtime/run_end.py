"""How one run of the engine ends: stops we asked for, exits we did not, and what follows.

A stop we asked for ends where its plan says (stopped, reported as an ended run, or
start again). An exit we did not ask for is classified from the log's tail and the exit
status (``classify``), recorded, and reported (``reports``): whether it is restarted
after a backoff, held by the breaker or left stopped is recovery's decision, which comes
back as a command (``restart_after``, ``hold``, ``stay_stopped``).
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from hwcheck.model import Severity
from serving.runtime.classify import (
    CrashClass,
    CrashVerdict,
    explain_exit,
    split_returncode,
    was_sigkilled,
)
from serving.runtime.launchers import LauncherError
from serving.runtime.machine_core import LOG, Awaiting, MachineCore, utcnow
from serving.runtime.reports import RunEnded
from serving.runtime.start_kind import StartFor
from serving.runtime.states import ServingChange, ServingState, StartRefused, StartResult
from serving.runtime.stopping import AfterStop, ReportEnd, StartAgain, StayStopped, StopPlan


class RunEnding(MachineCore):
    """Stops, exits, crash classification, and the answers to an ended run."""

    def start(self, reason: str, kind: StartFor) -> StartResult:
        """A start (``ServingMachine`` carries it out)."""
        raise NotImplementedError

    def _begin_stop(
        self, reason: str, final_reason: str, then: AfterStop, waiter: Future[Any] | None = None
    ) -> None:
        handle = self._handle
        plan = StopPlan(reason=reason, final_reason=final_reason, then=then)
        if waiter is not None:
            plan.waiters.append(waiter)
        self._backoff_until = None
        self._awaiting = None
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
            case ReportEnd(cause=cause):
                self._report_end(RunEnded(cause, ready_for_s=self._ready_for_s), cause)
            case StartAgain(kind=kind):
                # Straight to the launch: a "stopped" between the two would read as the
                # end of the restart to anyone watching the state.
                try:
                    result = self.start(plan.final_reason, kind)
                except StartRefused as refused:
                    why = "; ".join(r.message for r in refused.refusals) or "refused"
                    self._set_state(ServingState.STOPPED, f"the restart's start was refused: {why}")
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
        engine_pid = handle.pid
        survivors = self._launcher.survivors(handle)
        self._gate.note_survivors(survivors)
        self._launcher.release(handle)
        ready_since = self._health.ready_since
        ready_for_s = None if ready_since is None else max(self._clock() - ready_since, 0.0)
        self._ready_for_s = ready_for_s
        self._handle = None
        self._health.detach()
        how = _describe_exit(exit_code, signal)
        plan = self._stop_plan
        if survivors:
            self._warn(
                f"{len(survivors)} process(es) of the engine's group still run after it ended "
                f"(pids {', '.join(map(str, survivors))}): they may hold GPU memory"
            )
        if plan is not None and isinstance(plan.then, ReportEnd):
            verdict = self._crashed_meanwhile(exit_code, signal)
            if verdict is not None:
                # It was already dying: the probes saw its server go before its exit came.
                self._stop_plan = None
                plan.settle()
                self._report_crash(verdict, exit_code, signal, how, ready_for_s)
                return
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
        family = {engine_pid, *self._family}
        kernel_oom = self._kernel_oom(family) if was_sigkilled(exit_code, signal) else None
        verdict = explain_exit(
            self._capture.session_tail(self._tuning.classify_tail_lines),
            exit_code,
            signal,
            kernel_oom=kernel_oom,
        )
        self._report_crash(verdict, exit_code, signal, how, ready_for_s)

    def _crashed_meanwhile(self, exit_code: int | None, signal: int | None) -> CrashVerdict | None:
        """The crash an engine we were stopping as unhealthy had already had (None: none).

        A crashing vLLM answers ``/health`` 503 (``EngineDeadError``) and closes its API
        server before its process exits, so quick health probes can fail in that gap and
        start a stop. The stop's SIGINT ends a live engine with code 0; an exit with another
        code and a crash signature in its log's tail is the crash, and names its class and
        advice like any other. A death by signal is ours (the stop's escalation) and no
        signature means nothing to say beyond "unhealthy".
        """
        if signal is not None or exit_code in (None, 0):
            return None
        verdict = explain_exit(
            self._capture.session_tail(self._tuning.classify_tail_lines), exit_code, signal
        )
        return None if verdict.crash_class is CrashClass.UNKNOWN else verdict

    def _report_crash(
        self,
        verdict: CrashVerdict,
        exit_code: int | None,
        signal: int | None,
        how: str,
        ready_for_s: float | None,
    ) -> None:
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
        ended = RunEnded(
            message,
            crash_class=verdict.crash_class,
            exit_code=exit_code,
            signal=signal,
            ready_for_s=ready_for_s,
        )
        self._report_end(ended, message)

    def _kernel_oom(self, pids: set[int]) -> str | None:
        """The kernel log's OOM-killer record for one of the engine's pids (None: none).

        Its main pid, and the workers and a wrapper's child it was seen with. Only asked for an end by SIGKILL that we did not send: it tells ``oom_killed`` from
        ``killed``. An unreadable kernel log is logged and counts as no record.
        """
        if self._oom_record is None:
            return None
        try:
            return self._oom_record(pids)
        except Exception as exc:  # a closed /dev/kmsg, journalctl gone: say so, classify on
            LOG.warning("kernel log unreadable for the OOM-killer lookup: %s", exc)
            return None

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

    def _report_end(self, ended: RunEnded, reason: str) -> None:
        """The run is over: ``stopped``, reported, waiting for the answer."""
        self._backoff_until = None
        self._set_state(ServingState.STOPPED, reason)
        self._awaiting = Awaiting.EXIT
        try:
            self._reports.engine_exited(ended)
        except Exception:  # no answer is no licence to restart: it stays stopped
            LOG.exception("reporting the engine's end failed; it stays stopped")
            self._awaiting = None

    def _answer(self, expected: Awaiting, what: str) -> bool:
        """True when the machine waits for this answer (a person may have moved it since)."""
        if self._awaiting is expected:
            self._awaiting = None
            return True
        LOG.info("ignoring %s: nothing waits for it (a person moved the engine meanwhile)", what)
        return False

    def restart_after(self, delay_s: float, reason: str) -> None:
        """The answer to an ended run: ``backoff`` for ``delay_s``, then report it due."""
        if self._answer(Awaiting.EXIT, "a restart after a backoff"):
            self._backoff_until = self._clock() + delay_s
            self._set_state(ServingState.BACKOFF, reason)

    def hold(self, reason: str) -> None:
        """The answer to an ended run: the breaker's ``held`` (kept across fleetd restarts)."""
        if self._answer(Awaiting.EXIT, "a breaker hold"):
            self._set_state(ServingState.HELD, reason, severity=Severity.CRITICAL)
            self._emit(ServingChange.BREAKER, Severity.CRITICAL, reason)

    def stay_stopped(self, reason: str) -> None:
        """The answer to an ended run or a backoff's end: ``stopped``, saying why."""
        if self._awaiting is not None:
            self._awaiting = None
            self._backoff_until = None
            self._set_state(ServingState.STOPPED, reason)
        else:
            LOG.info("ignoring stay-stopped (%s): nothing waits for it", reason)


def _describe_exit(exit_code: int | None, signal: int | None) -> str:
    if signal is not None:
        return f"was killed by signal {signal}"
    if exit_code is not None:
        return f"exited with code {exit_code}"
    return "ended (exit status unknown)"
