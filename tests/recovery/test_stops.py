"""Every stop goes through recovery like every start: a person's, a switch's, the host's, fleetd's.

In-process: the real controller (policy, executors) over the memory ports and the
recording engine of ``tests.recovery.test_controller``; the engine notes whether
recovery's token was held for each move it was asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from recovery.controller import RecoveryController
from recovery.decisions import NoAction, Stop
from recovery.facts import EngineExit, Trigger
from recovery.moves import EngineMoves
from recovery.ports import Launched, StopKind
from recovery.settings import RecoverySettings
from serving.errors import Unavailable
from serving.runtime.start_kind import StartFor
from tests.support.cards import make_card
from tests.support.recovery_fakes import Engine, Ports, drain
from tests.support.recovery_ports import standalone_recovery


@dataclass
class TokenEngine(Engine):
    """A recording engine that notes, per move, whether recovery's token was held."""

    moves: EngineMoves | None = None
    held: list[bool] = field(default_factory=list)
    stops: bool = True
    closed: bool = False

    def _note(self) -> None:
        self.held.append(self.moves is not None and self.moves.holding)

    def start(self, reason: str, kind: StartFor) -> Launched:
        self._note()
        return super().start(reason, kind)

    def stop(self, reason: str, kind: StopKind) -> bool:
        self._note()
        if self.closed:
            raise Unavailable("fleetd is shutting down", "closed")
        super().stop(reason, kind)
        self.running = not self.stops
        return self.stops

    def restart_after(self, delay_s: float, reason: str) -> None:
        self._note()
        super().restart_after(delay_s, reason)

    def stay_stopped(self, reason: str) -> None:
        self._note()
        super().stay_stopped(reason)


@dataclass
class Rig:
    controller: RecoveryController
    ports: Ports
    engine: TokenEngine


def _rig(settings: RecoverySettings) -> Rig:
    ports = Ports(rig_cards=tuple(make_card(i) for i in range(4)))
    controller, _ = standalone_recovery(settings, ports)
    engine = TokenEngine(running=True)
    engine.moves = controller.engine_moves
    controller.attach_engine(engine)
    return Rig(controller, ports, engine)


@pytest.fixture
def rig() -> Iterator[Rig]:
    made = _rig(RecoverySettings(backoff_base_s=5))
    yield made
    made.controller.close()


def test_a_persons_stop_is_decided_carried_out_and_audited(rig: Rig) -> None:
    answer = rig.controller.request_stop(Trigger.STOP_REQUEST, "alice")
    assert answer.decision == Stop("stopped by operator")
    assert answer.stopped and answer.why_not == ""
    assert rig.engine.calls == ["stop person: stopped by operator"]
    assert rig.ports.audit == [
        ("alice", "stop", "stopped by operator", "accepted (the engine stops in the background)")
    ]
    assert rig.engine.held == [True]


def test_a_switch_stop_is_waited_for_and_keeps_its_words(rig: Rig) -> None:
    answer = rig.controller.request_stop(Trigger.SWITCH, "bob", "switching to profile b")
    assert answer.stopped
    assert rig.engine.calls == ["stop: switching to profile b"]
    assert rig.ports.audit == [("bob", "stop", "switching to profile b", "engine stopped")]


def test_an_engine_that_will_not_stop_is_said_so(rig: Rig) -> None:
    rig.engine.stops = False
    answer = rig.controller.request_stop(Trigger.SHUTDOWN, "fleetd")
    assert not answer.stopped
    assert answer.why_not == ("fleetd is shutting down (stop_on_exit): the engine would not stop")
    assert rig.ports.audit[-1][3] == "the engine would not stop"


def test_a_stop_while_fleetd_closes_says_so_and_is_recorded(rig: Rig) -> None:
    rig.engine.closed = True
    with pytest.raises(Unavailable):
        rig.controller.request_stop(Trigger.STOP_REQUEST, "alice")
    assert rig.ports.audit[-1][3] == "not stopped: fleetd is shutting down"


def test_a_stop_is_no_repair_it_happens_in_dry_run() -> None:
    made = _rig(RecoverySettings(dry_run=True))
    try:
        assert made.controller.request_stop(Trigger.STOP_REQUEST, "alice").stopped
        assert made.engine.calls == ["stop person: stopped by operator"]
    finally:
        made.controller.close()


def test_only_a_stop_takes_the_stop_path(rig: Rig) -> None:
    with pytest.raises(ValueError, match="not a stop"):
        rig.controller.request_stop(Trigger.START_REQUEST, "alice")
    assert rig.engine.calls == []


def test_without_an_engine_nothing_stops() -> None:
    controller, _ = standalone_recovery(RecoverySettings())
    try:
        answer = controller.request_stop(Trigger.STOP_REQUEST, "alice")
        assert answer.decision == NoAction("no engine is configured on this rig")
        assert not answer.stopped and answer.why_not == "no engine is configured on this rig"
    finally:
        controller.close()


def test_an_exit_while_the_host_reboots_is_no_crash_to_restart(rig: Rig) -> None:
    controller, engine = rig.controller, rig.engine
    controller.begin_host_reboot()
    assert controller.host_rebooting
    controller.on_engine_exit(EngineExit(None, None, 9, "engine was killed by signal 9"))
    drain(controller)
    assert engine.calls[-1].startswith("stay_stopped: engine was killed by signal 9: the host")
    controller.end_host_reboot()
    controller.on_engine_exit(EngineExit(None, None, 9, "engine was killed by signal 9"))
    drain(controller)
    assert engine.calls[-1] == "restart_after 5"
    assert all(engine.held)  # every answer to the supervisor went with recovery's token


def test_the_controller_keeps_the_bring_up_it_is_told_of(rig: Rig) -> None:
    rig.engine.running = False
    answer = rig.controller.request_start(Trigger.BRING_UP, "fleetd")
    kept = rig.controller.record_bring_up("boot-2", "every check passed; engine started", answer)
    assert rig.controller.last_bring_up == kept
    assert kept["boot_id"] == "boot-2" and kept["engine_started"] is True
    assert rig.ports.audit[-1] == (
        "fleetd",
        "bring_up",
        "the host rebooted",
        "every check passed; engine started",
    )
