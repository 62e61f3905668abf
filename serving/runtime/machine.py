"""The serving state machine's commands, starts and probes.

Runs on the supervisor's loop thread only. Whether to start is decided before a start
reaches here (recovery's start path): a start checks only the mechanics (the preflight:
the port, survivors of the last engine; then the launcher), and refusals name why.
Adoption picks up an engine a previous fleetd launched; probes move a starting engine to
ready, and an unhealthy one into a stop whose end is reported like an exit. A backoff's
end is reported too, and waits for the start (or stay-stopped) that answers it. How a
run ends is ``run_end``'s; the state and its announcements are ``machine_core``'s.
"""

from __future__ import annotations

import shlex
import uuid
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from hwcheck.model import Severity
from hwcheck.threads import run_in_thread
from serving.recipe.masking import mask_argv
from serving.recipe.spec import LaunchSpec
from serving.runtime import adoption
from serving.runtime.commands import Exited, Later, Request, Stop
from serving.runtime.health_watch import BecameReady, Healthy, Unhealthy
from serving.runtime.launchers import EngineHandle, LauncherError, LaunchError, launch_secrets
from serving.runtime.machine_core import FAMILY_EVERY_S, FAMILY_MAX_PIDS, LOG, Awaiting, utcnow
from serving.runtime.reports import RunEnded
from serving.runtime.run_end import RunEnding
from serving.runtime.start_kind import StartFor
from serving.runtime.states import (
    Drift,
    LaunchRecord,
    Refusal,
    ServingChange,
    ServingState,
    StartRefused,
    StartResult,
)
from serving.runtime.stopping import ReportEnd, StartAgain, StayStopped, escalate

_WATCH_SLICE_S = 1.0


class ServingMachine(RunEnding):
    """Commands, starts and probes of one engine (loop thread only)."""

    # -- commands ------------------------------------------------------------------------

    def start(self, reason: str, kind: StartFor) -> StartResult:
        """Launch (the decision was made by the caller); raises :class:`StartRefused`.

        A restart at a backoff's end happens only while the machine waits for it; a
        person's start clears a breaker hold.
        """
        if kind is StartFor.RESTART and self._awaiting is not Awaiting.BACKOFF_DUE:
            raise self._refuse(
                (Refusal("superseded", "the engine was moved meanwhile: no automatic restart"),),
                keep_state=True,
            )
        if self._handle is not None and self._state in (
            ServingState.STARTING,
            ServingState.READY,
            ServingState.UNHEALTHY,
        ):
            return StartResult(pid=self._handle.pid, already_running=True)
        if self._stop_plan is not None:  # a stop in progress (a restart's launch follows it)
            raise self._refuse(
                (Refusal("stopping", "the engine is stopping; start it once it has stopped"),),
                keep_state=True,
            )
        if (
            self._state is ServingState.FAILED
            and self._handle is not None
            and self._launcher.is_alive(self._handle)
        ):
            raise self._stuck_refusal(self._handle)
        if kind is not StartFor.RESTART:
            self._awaiting = None
        if self._handle is None and self.adopt():
            # The active profile's engine already runs (a switch back to the profile of a
            # drifted engine, a container started before the record was lost): serve it.
            self._awaiting = None
            handle = self._handle
            return StartResult(pid=None if handle is None else handle.pid, already_running=True)
        try:
            warnings = self._run_preflight(keep_state=self._state is not ServingState.HELD)
            spec = self._build_spec()
        except StartRefused:
            if kind is StartFor.RESTART:
                self._awaiting = None
                self._backoff_until = None
                self._set_state(
                    ServingState.STOPPED, f"automatic restart refused: {self._refusal_text()}"
                )
            raise
        self._awaiting = None
        if kind in (StartFor.RESTART, StartFor.RECOVERY_RESTART):
            self.restarts += 1
            self._save_state()
            why = "" if kind is StartFor.RESTART else f": {reason}"
            reason = f"automatic restart #{self.restarts}{why}"
        try:
            handle = self._launch(spec, reason=reason)
        except LaunchError as exc:
            if kind is StartFor.RESTART:  # as if it ended at once: recovery decides again
                self._emit(ServingChange.CRASH, Severity.WARNING, f"engine restart failed: {exc}")
                self._report_end(RunEnded(f"launch failed: {exc}"), f"launch failed: {exc}")
            else:
                self._set_state(ServingState.STOPPED, f"launch failed: {exc}")
            raise self._refuse((Refusal("launch_failed", str(exc)),), keep_state=True) from exc
        return StartResult(pid=handle.pid, already_running=False, warnings=warnings)

    def _refusal_text(self) -> str:
        return "; ".join(r.message for r in self._last_refusal) or "refused"

    def stop(self, command: Stop, waiter: Future[Any]) -> Later | None:
        """A stop with no restart; a person's stop wins over a restart in progress."""
        final_reason = command.hold_reason or command.reason
        plan = self._stop_plan
        if plan is not None:
            plan.then = StayStopped()
            plan.final_reason = final_reason
            plan.waiters.append(waiter)
            return Later.PENDING
        if self._handle is None:
            self._backoff_until = None
            self._set_state(ServingState.STOPPED, final_reason)
            return None
        self._begin_stop(command.reason, final_reason, StayStopped(), waiter)
        return Later.PENDING

    def restart(
        self, reason: str, waiter: Future[Any], kind: StartFor = StartFor.PERSON
    ) -> StartResult | Later:
        """A restart: stop, then start (the decision to was made by the caller).

        ``kind`` is the start's: a person's, or recovery's automatic one (``RESTART``).
        """
        if self._handle is None or not self._launcher.is_alive(self._handle):
            if self._handle is not None:
                self._engine_ended()
            return self.start(reason, kind)
        if self._state is ServingState.FAILED:
            raise self._stuck_refusal(self._handle)
        plan = self._stop_plan
        if plan is not None:
            plan.then = StartAgain(kind)
            plan.waiters.append(waiter)
            return Later.PENDING
        self._begin_stop("restart requested", reason, StartAgain(kind), waiter)
        return Later.PENDING

    def clear_hold(self) -> None:
        """``held`` becomes ``stopped`` (no start)."""
        if self._state is ServingState.HELD:
            self._set_state(ServingState.STOPPED, "breaker hold cleared by a person")

    def adopt(self) -> bool:
        """Adopt the recorded (or named) running engine; True if adopted."""
        if self._handle is not None:
            return False
        found = adoption.find_engine(self._launcher, self._spec_factory, self._warn)
        if isinstance(found, Drift) or found is None:
            self._note_drift(found if isinstance(found, Drift) else None)
            return False
        handle = found
        self._note_drift(None)
        self._capture.begin_session_at_last_launch()
        record = handle.record
        self._launch_record = adoption.adopted_launch(record)
        self._attach(handle)
        self._set_state(ServingState.STARTING, f"adopted the running engine (pid {handle.pid})")
        self._health.next_probe = self._clock()
        self._emit(
            ServingChange.ADOPTED,
            Severity.OK,
            f"adopted the engine fleetd launched earlier (pid {handle.pid}, {record.base_url})",
            launch=self._launch_record,
        )
        if adoption.runs_outdated_spec(record, self._spec_factory):
            self._warn(
                "the adopted engine runs an older launch spec than the current recipe: "
                "restart it to apply the recipe"
            )
        return True

    def _note_drift(self, drift: Drift | None) -> None:
        """Remember (and announce once) an engine that runs but is not the profile's."""
        if drift == self._drift:
            return
        self._drift = drift
        self.publish()
        if drift is None:
            return
        runs = drift.recipe_hash[:12] or "no cmpfleet.recipe-hash label"
        self._emit(
            ServingChange.DRIFT,
            Severity.WARNING,
            f"not adopted: {drift.what()} at {drift.url} runs recipe {runs}, not the active "
            f"profile's ({drift.expected_hash[:12]}); left running",
            drift=drift,
        )

    def exited(self, command: Exited) -> None:
        """The watcher saw an engine end (ignored when it is not the current one)."""
        if command.handle is self._handle and self._handle is not None:
            self._engine_ended()

    def close(self) -> None:
        """Detach from the engine (it keeps running) and answer stop waiters."""
        if self._handle is not None:
            try:
                self._launcher.detach(self._handle)
            except (LauncherError, OSError):
                LOG.exception("detaching from the engine failed")
        if self._stop_plan is not None:
            self._stop_plan.settle()

    # -- what is due ---------------------------------------------------------------------

    def wait_s(self) -> float | None:
        """Seconds until the next thing due (a probe, a backoff's end, a stop deadline)."""
        due: list[float] = []
        if self._state in (ServingState.STARTING, ServingState.READY):
            due.append(self._health.next_probe)
        if self._state is ServingState.BACKOFF and self._backoff_until is not None:
            due.append(self._backoff_until)
        if self._state is ServingState.STOPPING and self._stop_plan is not None:
            due.append(self._stop_plan.deadline)
        if not due:
            return None
        return max(min(due) - self._clock(), 0.0)

    def tick(self) -> None:
        """Do what is due."""
        now = self._clock()
        plan = self._stop_plan
        if self._state in (ServingState.STARTING, ServingState.READY):
            if now >= self._health.next_probe:
                self._probe(now)
        elif self._state is ServingState.BACKOFF and self._backoff_until is not None:
            if now >= self._backoff_until:
                self._backoff_over()
        elif self._state is ServingState.STOPPING and plan is not None and now >= plan.deadline:
            handle = self._handle
            if handle is not None:
                stuck = escalate(
                    plan, handle, self._launcher, now, self._serving, self._tuning, self._warn_at
                )
                if stuck is not None:
                    self._stop_failed(stuck)

    # -- starting ------------------------------------------------------------------------

    def _refuse(self, refusals: tuple[Refusal, ...], keep_state: bool) -> StartRefused:
        blocking = tuple(r for r in refusals if r.blocking)
        self._last_refusal = blocking
        if not keep_state and self._state is not ServingState.STOPPED:
            self._set_state(ServingState.STOPPED, blocking[0].message if blocking else None)
        self._emit(
            ServingChange.REFUSED,
            Severity.WARNING,
            "engine start refused: " + "; ".join(r.message for r in blocking),
            refusals=blocking,
        )
        return StartRefused(blocking)

    def _stuck_refusal(self, handle: EngineHandle) -> StartRefused:
        message = (
            f"the engine that would not stop still runs (pid {handle.pid}): reboot recommended"
        )
        return self._refuse((Refusal("stop_stuck", message),), keep_state=True)

    def _run_preflight(self, keep_state: bool, announce: bool = True) -> tuple[Refusal, ...]:
        """Blocking reasons raise :class:`StartRefused`; warnings are returned."""
        blocking, warnings = self._gate.check()
        if blocking:
            raise self._refuse(blocking, keep_state=keep_state)
        self._last_refusal = ()
        if warnings and announce:
            self._emit(
                ServingChange.WARNING,
                Severity.WARNING,
                "engine starts with warnings: " + "; ".join(w.message for w in warnings),
                refusals=warnings,
            )
        return warnings

    def _build_spec(self) -> LaunchSpec:
        try:
            return self._spec_factory()
        except Exception as exc:
            raise self._refuse(
                (Refusal("recipe", f"cannot build the launch spec: {exc}"),), keep_state=True
            ) from exc

    def _launch(self, spec: LaunchSpec, reason: str) -> EngineHandle:
        self._backoff_until = None
        self._capture.secrets.add(launch_secrets(spec))  # before the engine can echo them
        self._capture.begin_session()
        handle = self._launcher.start(spec)
        self._launch_record = LaunchRecord(
            launch_id=uuid.uuid4().hex,
            argv=spec.argv,
            env=dict(spec.env),
            recipe_hash=spec.recipe_hash,
            spec_hash=handle.record.spec_hash,
            pid=handle.pid,
            adopted=False,
            started_at=utcnow(),
            profile=spec.profile,
            waivers=dict(spec.waivers),
        )
        self._crash_class = None
        self._attach(handle)
        self._set_state(ServingState.STARTING, f"{reason}; launched pid {handle.pid}")
        self._health.next_probe = self._clock() + self._health.interval_s(starting=True)
        waived = "; ".join(f"{rule} ({why})" for rule, why in sorted(spec.waivers.items()))
        profile = f"profile {spec.profile}, " if spec.profile else ""
        self._emit(
            ServingChange.LAUNCH,
            Severity.OK,
            f"engine launched ({profile}pid {handle.pid}): "
            f"{shlex.join(mask_argv(list(spec.argv)))}"
            + (f"; lint waived: {waived}" if waived else ""),
            launch=self._launch_record,
        )
        return handle

    def _attach(self, handle: EngineHandle) -> None:
        self._handle = handle
        self._family = {handle.pid}
        self._family_due_s = 0.0
        self._url = handle.record.base_url
        self._health.attach(handle, self._clock())
        run_in_thread(
            f"engine-watch:{handle.pid}",
            lambda: self._watch(handle),
            on_crash=self._on_crash,
            log=LOG,
        )

    def _watch(self, handle: EngineHandle) -> None:
        """Wait for the engine to end and tell the loop (a thread per engine)."""
        while not self._closed.is_set() and self._handle is handle:
            try:
                ended = self._launcher.wait(handle, _WATCH_SLICE_S)
            except (LauncherError, OSError):
                LOG.exception("waiting on the engine (pid %d) failed", handle.pid)
                ended = False
                self._closed.wait(_WATCH_SLICE_S)
            if ended:
                if not self._closed.is_set():
                    self._enqueue(Request(Exited(handle)))
                return

    def _backoff_over(self) -> None:
        """The end of a backoff: report it; the answer is a start or a stay-stopped."""
        self._backoff_until = None
        self._awaiting = Awaiting.BACKOFF_DUE
        try:
            self._reports.backoff_due()
        except Exception:  # no answer is no licence to restart: it stays stopped
            LOG.exception("reporting the backoff's end failed; the engine stays stopped")
            self._awaiting = None
            self._set_state(ServingState.STOPPED, "the backoff ended without a decision")

    # -- probing -------------------------------------------------------------------------

    def _probe(self, now: float) -> None:
        self._health.schedule_next(now, starting=self._state is ServingState.STARTING)
        handle = self._handle
        if handle is None or self._health.target is None:
            return
        if not self._launcher.is_alive(handle):
            self._engine_ended()
            return
        self._note_family(handle, now)
        match self._health.probe(now, starting=self._state is ServingState.STARTING):
            case BecameReady():
                self._became_ready(now)
            case Unhealthy(reason=reason):
                self._set_state(ServingState.UNHEALTHY, reason, severity=Severity.WARNING)
                stopping = f"stopping the unhealthy engine: {reason}"
                self._begin_stop(stopping, stopping, ReportEnd(f"engine unhealthy: {reason}"))
            case Healthy():
                self._health.scrape_if_due(now)
            case _:
                pass

    def _note_family(self, handle: EngineHandle, now: float) -> None:
        """Keep the engine's pids (workers, a wrapper's child) for the OOM-killer lookup."""
        if now < self._family_due_s or len(self._family) >= FAMILY_MAX_PIDS:
            return
        self._family_due_s = now + FAMILY_EVERY_S
        try:
            members = self._launcher.members(handle)
        except (LauncherError, OSError) as exc:
            LOG.debug("listing the engine's processes failed: %s", exc)
            return
        self._family.update(members[: FAMILY_MAX_PIDS - len(self._family)])

    def _became_ready(self, now: float) -> None:
        self._health.became_ready(now)
        if self._handle is not None:  # at ready every worker is up: note them now
            self._family_due_s = 0.0
            self._note_family(self._handle, now)
        if self._launch_record is not None:
            self._launch_record = replace(self._launch_record, ready_at=utcnow())
            self._emit(
                ServingChange.LAUNCH,
                Severity.OK,
                f"engine ready (pid {self._launch_record.pid})",
                launch=self._launch_record,
            )
        self._set_state(ServingState.READY, "serving")
