"""No engine start or stop outside recovery's controller: the supervisor's guard says so.

fleetd builds its supervisor with recovery's token check (``recovery.moves``), so a
start or stop asked of it by anyone but recovery's executors raises before anything
moves, however the call was reached. Here: the token on its own, then a real supervisor
and the simulated engine (a child process on loopback) guarded the way fleetd guards it,
moved only through the controller's start and stop paths. That fleetd wires the guard
is ``tests/daemon/ports/test_moves_through_recovery.py``'s.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from recovery.controller import RecoveryController
from recovery.facts import Trigger
from recovery.moves import EngineMoves, MoveOutsideRecovery
from recovery.settings import RecoverySettings
from serving.runtime.process_launcher import ProcessLauncher
from serving.runtime.states import ServingChange, ServingState
from serving.runtime.supervisor import Supervisor
from serving.settings import ServingSettings, SupervisorTuning
from tests.support.engine_helpers import EventLog, free_port, kill_group, sim_spec
from tests.support.recovery_ports import attach, standalone_recovery
from tests.support.waiting import wait_until

DEADLINE_S = 60.0


def test_the_token_is_held_only_inside_the_block_and_only_on_its_thread() -> None:
    moves = EngineMoves()
    with pytest.raises(MoveOutsideRecovery, match="engine stop asked for outside recovery"):
        moves.check("stop")
    seen_elsewhere: list[bool] = []
    with moves.held():
        moves.check("stop")
        with moves.held():  # re-entrant: a restart's stop inside a start
            moves.check("start")
        moves.check("start")
        other = threading.Thread(target=lambda: seen_elsewhere.append(moves.holding))
        other.start()
        other.join(10)
    assert seen_elsewhere == [False]
    assert not moves.holding
    with pytest.raises(MoveOutsideRecovery):
        moves.check("start")


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[tuple[Supervisor, EventLog, RecoveryController]]:
    """A supervisor guarded by a controller's token, as fleetd builds it."""
    controller, reports = standalone_recovery(RecoverySettings())
    events = EventLog()
    state = tmp_path / "state"
    port = free_port()
    supervisor = Supervisor(
        lambda: sim_spec(port),
        ProcessLauncher(state),
        state,
        serving=ServingSettings(probe_interval_s=0.1, stop_timeout_s=5.0),
        tuning=SupervisorTuning(probe_timeout_s=0.5, log_poll_interval_s=0.05),
        on_event=events,
        reports=reports,
        guard=controller.engine_moves.check,
    )
    attach(controller, supervisor)
    supervisor.open()
    try:
        yield supervisor, events, controller
    finally:
        supervisor.close()
        controller.close()
        for pid in events.launch_pids():
            kill_group(pid)


def test_a_guarded_supervisor_moves_only_through_recovery(
    guarded: tuple[Supervisor, EventLog, RecoveryController],
) -> None:
    supervisor, events, controller = guarded
    with pytest.raises(MoveOutsideRecovery, match="engine start"):
        supervisor.start("a start made around recovery")
    assert events.of(ServingChange.LAUNCH) == []  # nothing was launched
    answer = controller.request_start(Trigger.START_REQUEST, "alice")
    assert answer.started, answer.why_not
    wait_until(lambda: supervisor.status().state is ServingState.READY, DEADLINE_S, "ready")
    for move in (
        lambda: supervisor.stop("a stop made around recovery"),
        lambda: supervisor.restart("a restart made around recovery"),
        lambda: supervisor.hold("a hold made around recovery"),
        lambda: supervisor.close(stop_engine=True),
    ):
        with pytest.raises(MoveOutsideRecovery):
            move()
    assert supervisor.status().state is ServingState.READY  # nothing moved
    stop = controller.request_stop(Trigger.STOP_REQUEST, "alice")
    assert stop.stopped
    wait_until(lambda: supervisor.status().state is ServingState.STOPPED, DEADLINE_S, "stopped")
