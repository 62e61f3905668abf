"""The supervisor with real engines: the simulated engine as a child process, real HTTP
probes on loopback, real signals. Small timings keep it fast; every wait has a deadline.

What follows an ended run (a backoff, the breaker's hold, a restart) is recovery's
decision: the supervisor reports, recovery's real controller (its ports in memory,
``tests.support.recovery_ports``) answers, as in fleetd.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import psutil
import pytest

from hwcheck.kernellog.oom import oom_kill_record
from recovery.controller import RecoveryController
from recovery.facts import Trigger
from recovery.policy import backoff_delay_s
from recovery.settings import RecoverySettings, policy_settings
from serving.recipe.spec import LaunchMode, LaunchSpec
from serving.runtime.classify import CrashClass
from serving.runtime.container_launcher import ContainerLauncher
from serving.runtime.launchers import Launcher
from serving.runtime.process_launcher import ProcessLauncher
from serving.runtime.reports import RunEnded
from serving.runtime.start_kind import StartFor
from serving.runtime.states import (
    Refusal,
    ServingChange,
    ServingEvent,
    ServingState,
    StartRefused,
)
from serving.runtime.supervisor import Supervisor
from serving.settings import ServingSettings, SupervisorTuning
from tests.support import loopback
from tests.support.engine_helpers import (
    SERVED_NAME,
    EventLog,
    SpecSequence,
    free_port,
    install_fake_docker,
    is_running,
    kill_group,
    sim_argv,
    sim_spec,
)
from tests.support.recovery_ports import attach, standalone_recovery
from tests.support.waiting import wait_until

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=30)


@dataclass(frozen=True)
class Timing:
    """The three settings a supervisor takes, with ``but`` to change any key by name."""

    serving: ServingSettings
    recovery: RecoverySettings
    tuning: SupervisorTuning

    def but(self, **changes: object) -> Timing:
        parts = {"serving": self.serving, "recovery": self.recovery, "tuning": self.tuning}
        for key, value in changes.items():
            name = next(n for n, part in parts.items() if key in type(part).model_fields)
            parts[name] = parts[name].model_copy(update={key: value})
        return Timing(**parts)  # type: ignore[arg-type]


FAST = Timing(
    ServingSettings(
        probe_interval_s=0.1,
        startup_timeout_s=30.0,
        probe_failures=2,
        stop_timeout_s=5.0,
        metrics_interval_s=0.2,
    ),
    RecoverySettings(
        backoff_base_s=0.1,
        backoff_max_s=0.4,
        backoff_reset_after_s=600.0,
        breaker_max_restarts=5,
        breaker_window_s=600.0,
    ),
    SupervisorTuning(
        probe_timeout_s=0.5, term_timeout_s=5.0, kill_wait_s=5.0, log_poll_interval_s=0.05
    ),
)
DEADLINE_S = 60.0  # generous: only a failing test waits it out, and a loaded CI is slow


@dataclass
class Rig:
    """A supervisor under test with its events, state dir and launcher."""

    supervisor: Supervisor
    events: EventLog
    state_dir: Path
    launcher: Launcher
    recovery: RecoveryController | None


class Harness:
    """Builds supervisors and cleans up: closes them, then SIGKILLs leftover engines (the
    tests may kill; the product must not)."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.rigs: list[Rig] = []

    def make(
        self,
        spec_factory: Callable[[], LaunchSpec],
        *,
        settings: Timing = FAST,
        preflight: Callable[[], list[Refusal]] = list,
        state_dir: Path | None = None,
        launcher: Launcher | None = None,
        open_now: bool = True,
        listener: Callable[[Supervisor, ServingEvent], None] | None = None,
        recovery: bool = True,
        kernel_log: Callable[[], list[str]] | None = None,
    ) -> Rig:
        """A supervisor, with recovery's controller answering its reports (unless not)."""
        state = state_dir or self.tmp_path / "state"
        events = EventLog()
        if isinstance(spec_factory, SpecSequence):
            spec_factory.events = events
        chosen = launcher or ProcessLauncher(state)
        holder: list[Supervisor] = []

        def on_event(event: ServingEvent) -> None:
            events(event)
            if listener is not None:
                listener(holder[0], event)

        controller, reports = standalone_recovery(settings.recovery)
        supervisor = Supervisor(
            spec_factory,
            chosen,
            state,
            serving=settings.serving,
            tuning=settings.tuning,
            preflight=preflight,
            on_event=on_event,
            reports=reports if recovery else None,
            oom_record=None
            if kernel_log is None
            else (lambda pids: oom_kill_record(kernel_log(), pids)),
        )
        attach(controller, supervisor)
        holder.append(supervisor)
        rig = Rig(supervisor, events, state, chosen, controller if recovery else None)
        self.rigs.append(rig)
        if open_now:
            supervisor.open()
        return rig

    def cleanup(self) -> None:
        for rig in self.rigs:
            rig.supervisor.close()
            if rig.recovery is not None:
                rig.recovery.close()
        for rig in self.rigs:
            for pid in rig.events.launch_pids():
                kill_group(pid)


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    yield h
    h.cleanup()


def wait_ready(rig: Rig, pid: int | None = None) -> int:
    """Wait for ``ready`` (of a pid other than ``pid`` when given); return the ready pid."""

    def ready() -> bool:
        status = rig.supervisor.status()
        return status.state is ServingState.READY and status.pid is not None and status.pid != pid

    try:
        wait_until(ready, DEADLINE_S, "ready")
    except AssertionError as exc:  # the events at the deadline, not at the start of the wait
        events = [e.message for e in rig.events.events][-8:]
        raise AssertionError(f"{exc} (events: {events})") from None
    ready_pid = rig.supervisor.status().pid
    assert ready_pid is not None
    return ready_pid


def test_start_goes_ready_and_reports_contract_fields(harness: Harness) -> None:
    port = free_port()
    rig = harness.make(lambda: sim_spec(port))
    result = rig.supervisor.start()
    assert not result.already_running
    assert result.pid is not None
    assert rig.supervisor.status().state in (ServingState.STARTING, ServingState.READY)
    pid = wait_ready(rig)
    assert pid == result.pid
    status = rig.supervisor.status().as_dict()
    assert {"state", "pid", "restarts", "since", "url"} <= set(status)
    assert status["state"] == "ready"
    assert status["restarts"] == 0
    assert status["url"] == f"http://127.0.0.1:{port}"
    assert status["since"].endswith("+00:00")
    models = loopback.get(f"{status['url']}/v1/models").json()
    assert models["data"][0]["id"] == SERVED_NAME
    # The log is read by its own thread: under load it may trail the HTTP answer a moment.
    wait_until(
        lambda: any("Application startup complete." in line for line in rig.supervisor.logs(50)),
        10,
        "the startup line in the engine log",
    )
    launches = [e.launch for e in rig.events.of(ServingChange.LAUNCH) if e.launch is not None]
    assert launches[-1].ready_at is not None
    assert launches[-1].env == {"CMPFLEET_TEST_ENGINE": "1"}
    assert launches[-1].recipe_hash == "test-recipe"
    # A second start is a no-op, not a second engine.
    again = rig.supervisor.start()
    assert again.already_running
    assert again.pid == pid
    # Metrics are scraped while ready.
    wait_until(lambda: rig.supervisor.status().metrics is not None, 5, "metrics")


def test_cuda_crash_is_classified_then_restarted_with_backoff(harness: Harness) -> None:
    """A ready engine crashes (SIGUSR1: the sim's crash-now, so no timer races the probes)."""
    port = free_port()
    rig = harness.make(lambda: sim_spec(port))
    rig.supervisor.start()
    first = wait_ready(rig)
    os.kill(first, signal.SIGUSR1)
    crash = rig.events.wait_for(
        lambda evs: any(e.kind is ServingChange.CRASH for e in evs), DEADLINE_S, "crash"
    )
    crash_event = next(e for e in crash if e.kind is ServingChange.CRASH)
    assert crash_event.crash_class is CrashClass.CUDA_FAULT
    assert crash_event.evidence is not None
    assert "illegal memory access" in crash_event.evidence
    assert crash_event.advice is not None
    assert "chase the Xid" in crash_event.advice
    assert crash_event.launch is not None
    assert crash_event.launch.exit_code == 1
    second = wait_ready(rig, pid=first)
    assert second != first
    status = rig.supervisor.status()
    assert status.restarts == 1
    assert ServingState.BACKOFF in rig.events.states()
    assert not is_running(first or 0)


def test_a_crash_whose_server_closes_before_its_exit_is_still_the_crash(
    harness: Harness,
) -> None:
    """The probes see the server go first and start a stop; the exit still names the crash.

    The engine lingers 1.5 s after its server closes (15 probe intervals): the stop for
    unhealthiness always begins before the exit, and the run's end is the CUDA fault with
    its advice, not "unhealthy".
    """
    port = free_port()
    rig = harness.make(lambda: sim_spec(port, "--sim-crash-linger-s", "1.5"))
    rig.supervisor.start()
    first = wait_ready(rig)
    os.kill(first, signal.SIGUSR1)
    crash = rig.events.wait_for(
        lambda evs: any(e.kind is ServingChange.CRASH for e in evs), DEADLINE_S, "crash"
    )
    assert ServingState.UNHEALTHY in rig.events.states()  # the race this test is about
    crash_event = next(e for e in crash if e.kind is ServingChange.CRASH)
    assert crash_event.crash_class is CrashClass.CUDA_FAULT
    assert crash_event.advice is not None and "chase the Xid" in crash_event.advice
    assert crash_event.launch is not None
    assert crash_event.launch.exit_code == 1
    assert crash_event.launch.crash_class is CrashClass.CUDA_FAULT
    second = wait_ready(rig, pid=first)
    assert second != first
    assert rig.supervisor.status().restarts == 1


def test_outside_sigkill_is_killed_and_restarted(harness: Harness) -> None:
    port = free_port()
    rig = harness.make(lambda: sim_spec(port))
    rig.supervisor.start()
    first = wait_ready(rig)
    os.kill(first, signal.SIGKILL)
    second = wait_ready(rig, pid=first)
    crash = rig.events.of(ServingChange.CRASH)[-1]
    # SIGKILL we did not send, no kernel log to say OOM: killed, not unknown (issue 44)
    assert crash.crash_class is CrashClass.KILLED
    assert crash.launch is not None
    assert crash.launch.signal == signal.SIGKILL
    assert "killed by signal 9" in crash.message
    assert second != first
    assert rig.supervisor.status().restarts == 1


def test_outside_sigkill_with_the_kernels_oom_record_for_its_pid_is_oom_killed(
    harness: Harness,
) -> None:
    """The supervisor asks the kernel log for an OOM kill of the engine's pid (issue 44)."""
    port = free_port()
    kernel: list[str] = ["Out of memory: Killed process 1 (init) total-vm:1kB"]  # another pid
    rig = harness.make(lambda: sim_spec(port), kernel_log=lambda: list(kernel))
    rig.supervisor.start()
    first = wait_ready(rig)
    record = f"Out of memory: Killed process {first} (python3) total-vm:81234567kB, anon-rss:1kB"
    kernel.append(record)
    os.kill(first, signal.SIGKILL)
    wait_ready(rig, pid=first)
    crash = rig.events.of(ServingChange.CRASH)[-1]
    assert crash.crash_class is CrashClass.OOM_KILLED
    assert crash.evidence == record


def test_an_oom_kill_of_a_wrapper_scripts_child_is_oom_killed(harness: Harness) -> None:
    """A launcher script that does not ``exec``: the kernel kills its python child, the
    shell exits 137 (not by a signal), and the record names the child's pid, which the
    supervisor saw in the engine's process group while it ran."""
    port = free_port()
    kernel: list[str] = []
    wrapped = shlex.join(sim_spec(port).argv)
    spec = replace(sim_spec(port), argv=("/bin/sh", "-c", f"{wrapped}; exit $?"))
    rig = harness.make(lambda: spec, kernel_log=lambda: list(kernel))
    rig.supervisor.start()
    shell = wait_ready(rig)
    [child] = psutil.Process(shell).children()
    record = f"Out of memory: Killed process {child.pid} (python3) total-vm:81234567kB"
    kernel.append(record)
    os.kill(child.pid, signal.SIGKILL)  # what the OOM killer does
    wait_until(lambda: rig.events.of(ServingChange.CRASH), 30, "the crash")
    crash = rig.events.of(ServingChange.CRASH)[-1]
    assert crash.launch is not None and crash.launch.exit_code == 137, crash.message
    assert crash.crash_class is CrashClass.OOM_KILLED and crash.evidence == record


def test_an_unreadable_kernel_log_leaves_a_sigkill_killed(harness: Harness) -> None:
    def unreadable() -> list[str]:
        raise OSError("/dev/kmsg: permission denied")

    port = free_port()
    rig = harness.make(lambda: sim_spec(port), kernel_log=unreadable)
    rig.supervisor.start()
    first = wait_ready(rig)
    os.kill(first, signal.SIGKILL)
    wait_ready(rig, pid=first)
    assert rig.events.of(ServingChange.CRASH)[-1].crash_class is CrashClass.KILLED


def test_hang_goes_unhealthy_and_is_restarted_gracefully(harness: Harness) -> None:
    port = free_port()
    specs = SpecSequence([sim_spec(port, "--sim-hang-after-s", "0.2"), sim_spec(port)])
    rig = harness.make(specs)
    first = rig.supervisor.start().pid
    second = wait_ready(rig, pid=first)
    states = rig.events.states()
    assert ServingState.UNHEALTHY in states
    unhealthy = states.index(ServingState.UNHEALTHY)
    # Stopped (the run is over, reported), then recovery's answer: a backoff.
    assert states[unhealthy + 1 : unhealthy + 4] == [
        ServingState.STOPPING,
        ServingState.STOPPED,
        ServingState.BACKOFF,
    ]
    ended = [
        e.launch
        for e in rig.events.of(ServingChange.LAUNCH)
        if e.launch is not None and e.launch.pid == first and e.launch.ended_at is not None
    ]
    assert ended[-1].exit_code == 0  # the hung engine still honoured SIGINT
    assert second != first
    assert rig.supervisor.status().restarts == 1


def test_breaker_holds_after_too_many_restarts_and_a_person_can_start_again(
    harness: Harness,
) -> None:
    port = free_port()
    settings = FAST.but(breaker_max_restarts=2)
    crashing = sim_spec(port, "--sim-crash-after-s", "0.05", ready_after_s=0.1)
    specs = SpecSequence([crashing, crashing, crashing, sim_spec(port)])
    rig = harness.make(specs, settings=settings)
    rig.supervisor.start()
    rig.events.wait_state(ServingState.HELD, DEADLINE_S)
    status = rig.supervisor.status()
    assert status.state is ServingState.HELD
    assert status.restarts == 2
    assert status.pid is None
    assert "held until a person" in (status.reason or "")
    assert rig.events.of(ServingChange.BREAKER)
    # Backoff grew: 0.1 s then 0.2 s.
    backoffs = [
        e.message for e in rig.events.of(ServingChange.STATE) if e.state is ServingState.BACKOFF
    ]
    assert "restarting in 0.1 s" in backoffs[0]
    assert "restarting in 0.2 s" in backoffs[1]
    # A person's start (recovery's start path, as fleetctl start) clears the hold.
    assert rig.recovery is not None
    assert rig.recovery.request_start(Trigger.START_REQUEST, "test").started
    wait_ready(rig)
    assert rig.supervisor.status().restarts == 2  # a running total, never reset


def test_sustained_readiness_resets_the_backoff_streak(harness: Harness) -> None:
    port = free_port()
    settings = FAST.but(backoff_reset_after_s=0.2)
    rig = harness.make(lambda: sim_spec(port, "--sim-crash-after-s", "0.6"), settings=settings)
    rig.supervisor.start()
    rig.events.wait_for(
        lambda evs: sum(e.kind is ServingChange.CRASH for e in evs) >= 2, DEADLINE_S, "two crashes"
    )
    backoffs = [
        e.message for e in rig.events.of(ServingChange.STATE) if e.state is ServingState.BACKOFF
    ]
    # Each engine served longer than backoff_reset_after_s, so each crash is the first in
    # a row again and waits the base delay; the running total still counts up.
    assert all("restarting in 0.1 s (failure 1 in a row)" in m for m in backoffs[:2])
    wait_until(lambda: rig.supervisor.status().restarts >= 2, DEADLINE_S, "two restarts")


def test_clear_hold_leaves_it_stopped(harness: Harness) -> None:
    port = free_port()
    settings = FAST.but(breaker_max_restarts=1)
    rig = harness.make(
        lambda: sim_spec(port, "--sim-crash-after-s", "0.05", ready_after_s=0.1), settings=settings
    )
    rig.supervisor.start()
    rig.events.wait_state(ServingState.HELD, DEADLINE_S)
    assert rig.supervisor.clear_hold().state is ServingState.STOPPED


def test_graceful_stop_exits_0_and_stays_stopped(harness: Harness) -> None:
    port = free_port()
    rig = harness.make(lambda: sim_spec(port))
    rig.supervisor.start()
    pid = wait_ready(rig)
    status = rig.supervisor.stop("operator asked")
    assert status.state is ServingState.STOPPED
    assert status.reason == "operator asked"
    assert status.pid is None
    assert not is_running(pid)
    ended = rig.events.of(ServingChange.LAUNCH)[-1].launch
    assert ended is not None
    assert ended.exit_code == 0
    assert ended.crash_class is None
    assert not rig.events.of(ServingChange.CRASH)
    assert any("Shutting down" in line for line in rig.supervisor.logs(20))
    assert not (rig.state_dir / "engine.pid").exists()


def test_sigint_ignored_escalates_to_sigterm(harness: Harness) -> None:
    port = free_port()
    settings = FAST.but(stop_timeout_s=0.3)
    rig = harness.make(lambda: sim_spec(port, "--sim-ignore-sigint"), settings=settings)
    rig.supervisor.start()
    pid = wait_ready(rig)
    assert rig.supervisor.stop().state is ServingState.STOPPED
    assert not is_running(pid)
    assert any("sending SIGTERM" in e.message for e in rig.events.of(ServingChange.WARNING))


def test_engine_ignoring_every_signal_is_failed_and_left_running(harness: Harness) -> None:
    port = free_port()
    settings = FAST.but(stop_timeout_s=0.3, term_timeout_s=0.3)
    rig = harness.make(lambda: sim_spec(port, "--sim-ignore-signals"), settings=settings)
    rig.supervisor.start()
    pid = wait_ready(rig)
    status = rig.supervisor.stop()
    assert status.state is ServingState.FAILED
    assert "stop stuck: reboot recommended" in (status.reason or "")
    assert status.pid == pid
    assert rig.events.of(ServingChange.STOP_STUCK)
    # Nothing killed it: the product never SIGKILLs without allow_kill.
    assert psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    assert is_running(pid)
    with pytest.raises(StartRefused) as refused:
        rig.supervisor.start()
    assert refused.value.refusals[0].code == "stop_stuck"
    assert is_running(pid)
    # Once it finally goes (here: the test kills it), the supervisor says stopped.
    kill_group(pid)
    rig.events.wait_state(ServingState.STOPPED, DEADLINE_S)


def test_allow_kill_sigkills_an_engine_that_ignores_signals(harness: Harness) -> None:
    port = free_port()
    settings = FAST.but(stop_timeout_s=0.2, term_timeout_s=0.2, allow_kill=True)
    rig = harness.make(lambda: sim_spec(port, "--sim-ignore-signals"), settings=settings)
    rig.supervisor.start()
    pid = wait_ready(rig)
    assert rig.supervisor.stop().state is ServingState.STOPPED
    assert not is_running(pid)
    assert any("sending SIGKILL" in e.message for e in rig.events.of(ServingChange.WARNING))


def test_blocking_preflight_refuses_the_start(harness: Harness) -> None:
    port = free_port()
    latch = Refusal("port_in_use", "port 8000 on 127.0.0.1 is taken")
    rig = harness.make(lambda: sim_spec(port), preflight=lambda: [latch])
    with pytest.raises(StartRefused) as refused:
        rig.supervisor.start()
    assert refused.value.refusals == (latch,)
    status = rig.supervisor.status()
    assert status.state is ServingState.STOPPED
    assert status.last_refusal == (latch,)
    assert status.as_dict()["last_refusal"][0]["code"] == "port_in_use"
    assert rig.events.of(ServingChange.REFUSED)[0].refusals == (latch,)
    assert not (rig.state_dir / "engine.pid").exists()
    assert rig.events.launch_pids() == []


def test_warnings_do_not_block_and_are_returned(harness: Harness) -> None:
    port = free_port()
    warning = Refusal("lint", "model path missing", blocking=False)
    rig = harness.make(lambda: sim_spec(port), preflight=lambda: [warning])
    result = rig.supervisor.start()
    assert result.warnings == (warning,)
    wait_ready(rig)


def test_preflight_is_checked_again_before_an_automatic_restart(harness: Harness) -> None:
    port = free_port()
    refusals: list[Refusal] = []
    rig = harness.make(lambda: sim_spec(port), preflight=lambda: list(refusals))
    rig.supervisor.start()
    pid = wait_ready(rig)
    refusals.append(Refusal("port_in_use", "port 8000 on 127.0.0.1 is taken"))
    # Crashed once the port is taken (SIGUSR1: the sim's crash-now). A timer could fire and
    # the restart succeed before a loaded machine got here.
    os.kill(pid, signal.SIGUSR1)
    rig.events.wait_for(
        lambda evs: any("automatic restart refused" in e.message for e in evs),
        DEADLINE_S,
        "the automatic restart refused",
    )
    status = rig.supervisor.status()
    assert "automatic restart refused" in (status.reason or "")
    assert status.restarts == 0


def test_a_restart_whose_launch_is_refused_ends_stopped_with_the_reason(
    harness: Harness,
) -> None:
    """Whether to restart was decided before (recovery's gate refuses with it running);
    the mechanics after the stop (here the port) can still refuse the launch."""
    port = free_port()
    refusals: list[Refusal] = []
    rig = harness.make(lambda: sim_spec(port), preflight=lambda: list(refusals))
    rig.supervisor.start()
    pid = wait_ready(rig)
    refusals.append(Refusal("port_in_use", f"port {port} on 127.0.0.1 is taken"))
    with pytest.raises(StartRefused, match="is taken"):
        rig.supervisor.restart()
    status = rig.supervisor.status()
    assert status.state is ServingState.STOPPED and status.pid is None
    assert [r.code for r in status.last_refusal] == ["port_in_use"]
    assert not is_running(pid)
    # Never a "stopped" between the stop and the launch (a watcher would read it as the end).
    states = rig.events.states()
    assert ServingState.STOPPED not in states[states.index(ServingState.STOPPING) + 1 : -1]


def test_restart_replaces_the_engine(harness: Harness) -> None:
    port = free_port()
    rig = harness.make(lambda: sim_spec(port))
    rig.supervisor.start()
    first = wait_ready(rig)
    result = rig.supervisor.restart(timeout_s=DEADLINE_S)
    assert result.pid is not None
    assert result.pid != first
    wait_ready(rig, pid=first)
    assert not is_running(first)
    assert rig.supervisor.status().restarts == 0  # a person's restart is not a failure


def test_recovery_stop_with_hold_reason_stays_stopped(harness: Harness) -> None:
    port = free_port()
    rig = harness.make(lambda: sim_spec(port))
    rig.supervisor.start()
    wait_ready(rig)
    status = rig.supervisor.stop("Xid 31 on card 1", hold_reason="reboot required: Xid 31")
    assert status.state is ServingState.STOPPED
    assert status.reason == "reboot required: Xid 31"
    assert rig.events.launch_pids() == [rig.events.launch_pids()[0]]


def test_stop_while_starting_stops_the_loading_engine(harness: Harness) -> None:
    port = free_port()
    rig = harness.make(lambda: sim_spec(port, ready_after_s=30))
    pid = rig.supervisor.start().pid
    assert pid is not None
    wait_until(
        lambda: any("Loading safetensors" in line for line in rig.supervisor.logs(5)),
        DEADLINE_S,
        "the engine loading",
    )
    status = rig.supervisor.stop()
    assert status.state is ServingState.STOPPED
    assert not is_running(pid)
    ended = rig.events.of(ServingChange.LAUNCH)[-1].launch
    assert ended is not None
    assert ended.exit_code == 0
    assert ended.ready_at is None


def test_stop_during_backoff_cancels_the_restart(harness: Harness) -> None:
    port = free_port()
    settings = FAST.but(backoff_base_s=30.0, backoff_max_s=30.0)
    rig = harness.make(lambda: sim_spec(port), settings=settings)
    rig.supervisor.start()
    pid = wait_ready(rig)
    os.kill(pid, signal.SIGKILL)
    rig.events.wait_state(ServingState.BACKOFF, DEADLINE_S)
    assert rig.supervisor.status().backoff_remaining_s is not None
    status = rig.supervisor.stop("Xid 79 on card 0", hold_reason="reboot required: Xid 79")
    assert status.state is ServingState.STOPPED
    assert status.reason == "reboot required: Xid 79"
    assert len(rig.events.launch_pids()) == 1


def test_an_event_handler_may_stop_the_engine_without_deadlock(harness: Harness) -> None:
    port = free_port()

    def recovery(supervisor: Supervisor, event: ServingEvent) -> None:
        if event.kind is ServingChange.STATE and event.state is ServingState.READY:
            supervisor.stop("recovery decision", hold_reason="reboot required")

    rig = harness.make(lambda: sim_spec(port), listener=recovery)
    pid = rig.supervisor.start().pid
    assert pid is not None
    rig.events.wait_state(ServingState.READY, DEADLINE_S)
    rig.events.wait_state(ServingState.STOPPED, DEADLINE_S)
    assert rig.supervisor.status().reason == "reboot required"
    assert not is_running(pid)


def test_adoption_by_a_new_supervisor_keeps_the_same_engine(harness: Harness) -> None:
    port = free_port()
    first = harness.make(lambda: sim_spec(port))
    first.supervisor.start()
    pid = wait_ready(first)
    first.supervisor.close()  # fleetd exits; the engine must outlive it
    assert is_running(pid)
    assert (first.state_dir / "engine.pid").exists()
    second = harness.make(lambda: sim_spec(port), open_now=False)
    assert second.supervisor.open() is True
    assert wait_ready(second) == pid
    status = second.supervisor.status()
    assert status.adopted
    assert status.url == f"http://127.0.0.1:{port}"
    assert second.events.of(ServingChange.ADOPTED)
    assert not any(
        e.kind is ServingChange.LAUNCH and not e.launch.adopted
        for e in second.events.events
        if e.launch
    )
    # Its earlier log lines are there after the restart of fleetd.
    assert any("Application startup complete." in line for line in second.supervisor.logs(100))
    # It can still be stopped gracefully; exit code is unknown for an adopted engine.
    assert second.supervisor.stop().state is ServingState.STOPPED
    assert not is_running(pid)


def test_adopted_engine_that_crashes_is_classified_from_its_own_lines(harness: Harness) -> None:
    port = free_port()
    first = harness.make(lambda: sim_spec(port))
    first.supervisor.start()
    pid = wait_ready(first)
    first.supervisor.close()
    second = harness.make(lambda: sim_spec(port), open_now=False)
    second.supervisor.open()
    wait_ready(second)
    os.kill(pid, signal.SIGKILL)
    crash = second.events.wait_for(
        lambda evs: any(e.kind is ServingChange.CRASH for e in evs), DEADLINE_S, "crash"
    )
    event = next(e for e in crash if e.kind is ServingChange.CRASH)
    assert event.crash_class is CrashClass.UNKNOWN
    assert "exit status unknown" in event.message
    wait_ready(second, pid=pid)
    assert second.supervisor.status().restarts == 1
    second.supervisor.close()
    # The running total survives a restart of fleetd too.
    third = harness.make(lambda: sim_spec(port), open_now=False)
    assert third.supervisor.open() is True
    assert third.supervisor.status().restarts == 1


def test_stale_record_is_not_adopted(harness: Harness, tmp_path: Path) -> None:
    port = free_port()
    first = harness.make(lambda: sim_spec(port))
    first.supervisor.start()
    pid = wait_ready(first)
    first.supervisor.close()
    kill_group(pid)
    wait_until(lambda: not is_running(pid), 5, "engine gone")
    second = harness.make(lambda: sim_spec(port), open_now=False)
    assert second.supervisor.open() is False
    assert second.supervisor.status().state is ServingState.STOPPED
    assert not (second.state_dir / "engine.pid").exists()


def test_close_with_stop_engine_stops_it(harness: Harness) -> None:
    port = free_port()
    rig = harness.make(lambda: sim_spec(port))
    rig.supervisor.start()
    pid = wait_ready(rig)
    rig.supervisor.close(stop_engine=True)
    assert not is_running(pid)
    assert not (rig.state_dir / "engine.pid").exists()


def test_crash_while_starting_is_classified(harness: Harness) -> None:
    """With nobody listening to its reports the supervisor leaves an ended run stopped."""
    port = free_port()
    rig = harness.make(
        lambda: sim_spec(
            port, "--sim-fail-start-after-s", "0.1", "--sim-crash-kind", "kv_oom", ready_after_s=5
        ),
        recovery=False,
    )
    rig.supervisor.start()
    rig.events.wait_state(ServingState.STOPPED, DEADLINE_S, after=1)
    crash = rig.events.of(ServingChange.CRASH)[-1]
    assert crash.crash_class is CrashClass.KV_OOM
    # the cause sits above the API server's 60-frame traceback: the tail read holds it
    assert crash.evidence is not None and "KV cache is needed" in crash.evidence
    assert "max_model_len" in (crash.advice or "")
    assert "while starting" in crash.message
    assert rig.supervisor.status().crash_class is CrashClass.KV_OOM


def test_startup_timeout_restarts_a_start_that_never_finishes(harness: Harness) -> None:
    """The first launch never gets ready: after 0.5 s it is unhealthy, stopped and relaunched.

    The relaunch must be ready within the same 0.5 s, which a loaded machine cannot promise
    for a Python engine's start-up. So its spec probes an engine this test started (and saw
    ready) beforehand, while it launches a stand-in process: the relaunch is ready at its
    first probe however slowly processes start, and the timeout still has to fire first.
    """
    waiting_port, ready_port = free_port(), free_port()
    ready_engine = subprocess.Popen(
        sim_argv(ready_port, ready_after_s=0),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_until(lambda: answers_ready(ready_port), DEADLINE_S, "the pre-started engine")
        stand_in = (sys.executable, "-c", "import signal; signal.pause()")
        relaunch = replace(sim_spec(ready_port), argv=stand_in)
        specs = SpecSequence([sim_spec(waiting_port, ready_after_s=60), relaunch])
        rig = harness.make(specs, settings=FAST.but(startup_timeout_s=0.5))
        first = rig.supervisor.start().pid
        second = wait_ready(rig, pid=first)
        assert rig.supervisor.status().restarts == 1  # before the probed engine goes away
    finally:
        kill_group(ready_engine.pid)
        ready_engine.wait(DEADLINE_S)
    states = rig.events.of(ServingChange.STATE)
    unhealthy = [e for e in states if e.state is ServingState.UNHEALTHY]
    assert "not ready after 0.5 s" in unhealthy[0].message
    assert rig.events.launch_pids()[:2] == [first, second]
    assert not is_running(first or 0)


def answers_ready(port: int) -> bool:
    try:
        return loopback.get(f"http://127.0.0.1:{port}/health").status_code == 200
    except httpx.HTTPError:
        return False


def test_progress_is_the_last_log_line_while_starting(harness: Harness) -> None:
    port = free_port()
    rig = harness.make(lambda: sim_spec(port, ready_after_s=30))
    rig.supervisor.start()
    wait_until(
        lambda: (
            "Loading safetensors checkpoint shards" in (rig.supervisor.status().last_log_line or "")
        ),
        DEADLINE_S,
        "loading progress as the last line",
    )
    assert rig.supervisor.status().state is ServingState.STARTING


def test_launch_failure_is_a_refusal_with_the_reason(harness: Harness) -> None:
    port = free_port()
    rig = harness.make(lambda: replace(sim_spec(port), argv=("no-such-vllm", "serve", "m")))
    with pytest.raises(StartRefused, match="not found on PATH") as refused:
        rig.supervisor.start()
    assert refused.value.refusals[0].code == "launch_failed"
    assert rig.supervisor.status().state is ServingState.STOPPED


def test_bad_settings_name_the_key() -> None:
    with pytest.raises(ValueError, match="probe_interval_s"):
        ServingSettings(probe_interval_s=0)
    with pytest.raises(ValueError, match="backoff_base_s"):
        RecoverySettings(backoff_base_s=0)
    with pytest.raises(ValueError, match="probe_timeout_s"):
        SupervisorTuning(probe_timeout_s=-1)


def test_backoff_delay_formula() -> None:
    """The policy's backoff on the config's defaults (the supervisor only carries it out)."""
    settings = policy_settings(RecoverySettings())
    assert [backoff_delay_s(settings, n) for n in (1, 2, 3, 4, 5, 6, 7, 100)] == [
        10,
        20,
        40,
        80,
        160,
        300,
        300,
        300,
    ]


def test_a_backoff_max_below_the_base_means_no_growth() -> None:
    """The config file accepts it (as it always has); the delay stays at the base."""
    settings = policy_settings(RecoverySettings(backoff_base_s=10, backoff_max_s=5))
    assert [backoff_delay_s(settings, n) for n in (1, 2, 5)] == [10, 10, 10]


def test_container_mode_end_to_end_with_the_fake_runtime(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir, fake_state = install_fake_docker(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(fake_state))
    monkeypatch.setenv("FAKE_DOCKER_IMAGE", "sim-image")
    port = free_port()
    spec = LaunchSpec(
        mode=LaunchMode.DOCKER,
        argv=("docker", "run", "--name", "engine", "sim-image", *sim_argv(port)),
        env={},
        host="127.0.0.1",
        port=port,
        served_model_name=SERVED_NAME,
        container_name="engine",
    )
    state = tmp_path / "state"
    rig = harness.make(lambda: spec, launcher=ContainerLauncher(state, "docker"), state_dir=state)
    rig.supervisor.start()
    pid = wait_ready(rig)
    wait_until(
        lambda: any("Application startup complete." in line for line in rig.supervisor.logs(50)),
        DEADLINE_S,
        "container logs in the capture",
    )
    rig.supervisor.close()
    # A restarted fleetd adopts the container by its record.
    again = harness.make(
        lambda: spec, launcher=ContainerLauncher(state, "docker"), state_dir=state, open_now=False
    )
    assert again.supervisor.open() is True
    assert wait_ready(again) == pid
    assert again.supervisor.stop().state is ServingState.STOPPED
    assert not is_running(pid)


def test_no_restart_on_top_of_workers_the_last_engine_left_behind(harness: Harness) -> None:
    """A crashed engine whose worker still runs (and may hold GPU memory) is not restarted
    on top of it, and the worker is not killed: a person decides (reboot)."""
    worker = "import time; time.sleep(300)"
    crash = (
        "import subprocess, sys, time; "
        f"subprocess.Popen([sys.executable, '-c', {worker!r}]); time.sleep(0.2); sys.exit(3)"
    )
    spec = replace(sim_spec(free_port()), argv=(sys.executable, "-c", crash))
    rig = harness.make(lambda: spec, open_now=True)
    rig.supervisor.start()
    launched_pid = rig.events.launch_pids()[0]

    def refused() -> bool:
        status = rig.supervisor.status()
        return status.state is ServingState.STOPPED and any(
            r.code == "engine_survivors" for r in status.last_refusal
        )

    wait_until(
        refused, DEADLINE_S, f"the restart refused ({[e.message for e in rig.events.events][-4:]})"
    )
    survivors = [
        p for p in psutil.process_iter(["cmdline"]) if worker in " ".join(p.info["cmdline"] or [])
    ]
    assert survivors, "the worker was killed: the product must never do that"
    assert len(rig.events.launch_pids()) == 1, "a second engine was started on top of the worker"
    for process in survivors:  # the test cleans up; the product must not
        process.kill()
    assert launched_pid


def test_secrets_never_reach_events(harness: Harness) -> None:
    """Events are logged and stored: an API key in argv or a token in env must be masked."""
    base = sim_spec(free_port())
    spec = replace(
        base,
        argv=(*base.argv, "--api-key", "sk-live-secret"),
        env={**base.env, "HF_TOKEN": "hf_secret_value"},
    )
    rig = harness.make(lambda: spec)
    rig.supervisor.start()
    wait_ready(rig)
    dumped = repr([(e.message, e.as_dict()) for e in rig.events.events])
    assert "--api-key" in dumped
    assert "sk-live-secret" not in dumped
    assert "hf_secret_value" not in dumped


class RecordedReports:
    """An ``EngineReports`` listener that only records (the test answers by hand)."""

    def __init__(self) -> None:
        self.ended: list[RunEnded] = []
        self.backoffs_due = 0

    def engine_exited(self, ended: RunEnded) -> None:
        self.ended.append(ended)

    def backoff_due(self) -> None:
        self.backoffs_due += 1


def test_an_ended_run_is_reported_and_the_answer_obeyed(tmp_path: Path) -> None:
    """Serving reports and obeys: it never decides on a restart itself."""
    port = free_port()
    reports = RecordedReports()
    events = EventLog()
    supervisor = Supervisor(
        lambda: sim_spec(port),
        ProcessLauncher(tmp_path),
        tmp_path,
        serving=FAST.serving,
        tuning=FAST.tuning,
        on_event=events,
        reports=reports,
    )
    supervisor.open()
    try:
        first = supervisor.start().pid
        assert first is not None
        events.wait_state(ServingState.READY, DEADLINE_S)
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: bool(reports.ended), DEADLINE_S, "the exit reported")
        (ended,) = reports.ended
        assert ended.crash_class == "killed" and ended.signal == signal.SIGKILL
        assert ended.ready_for_s is not None and ended.ready_for_s >= 0
        assert supervisor.status().state is ServingState.STOPPED
        # An automatic restart nobody waits for is refused; a hold is ignored later on.
        with pytest.raises(StartRefused, match="moved meanwhile"):
            supervisor.start("automatic restart", StartFor.RESTART)
        supervisor.restart_after(0.1, "restarting in 0.1 s")
        events.wait_state(ServingState.BACKOFF, DEADLINE_S)
        wait_until(lambda: reports.backoffs_due == 1, DEADLINE_S, "the backoff's end reported")
        assert supervisor.status().state is ServingState.BACKOFF  # waiting for the answer
        second = supervisor.start("automatic restart", StartFor.RESTART).pid
        assert second not in (None, first)
        assert supervisor.status().restarts == 1
        supervisor.hold("too late")  # nothing waits for it: ignored
        events.wait_state(ServingState.READY, DEADLINE_S, after=events.count() - 1)
        assert supervisor.status().state is ServingState.READY
    finally:
        supervisor.close()
        for pid in events.launch_pids():
            kill_group(pid)
