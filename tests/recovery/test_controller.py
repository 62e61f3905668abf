"""The controller: every trigger reaches ``decide`` once and the executors carry it out.

Its ports are the memory ones (``tests.support.recovery_ports``) plus an engine that
records the commands it gets; the real supervisor behind the same port is tested in
tests/serving, and the whole of it in fleetd in tests/daemon.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from hwcheck.model import Advice, CheckResult, LostKind, RigSnapshot, Severity
from recovery.controller import RecoveryController
from recovery.decisions import Reason
from recovery.facts import EngineExit, LatchFact, Trigger
from recovery.ports import Launched
from recovery.settings import RecoverySettings
from serving.errors import Busy, Conflict
from serving.runtime.classify import CrashClass
from serving.runtime.start_kind import StartFor
from tests.support.cards import BOOT_AT, make_card
from tests.support.recovery_fakes import Engine, Ports, drain
from tests.support.recovery_ports import standalone_recovery


@dataclass
class Rig:
    """A controller over these ports and this engine (an 8-card rig)."""

    controller: RecoveryController
    ports: Ports
    engine: Engine


@pytest.fixture
def rig() -> Iterator[Rig]:
    ports = Ports(rig_cards=tuple(make_card(i) for i in range(8)))
    controller, _ = standalone_recovery(RecoverySettings(backoff_base_s=5), ports)
    engine = Engine()
    controller.attach_engine(engine)
    yield Rig(controller, ports, engine)
    controller.close()


def test_a_start_probes_the_recipes_cards_first_then_starts(rig: Rig) -> None:
    controller, ports, engine = rig.controller, rig.ports, rig.engine
    engine.gpus = frozenset(range(6))
    answer = controller.request_start(Trigger.START_REQUEST, "alice")
    assert answer.started
    assert ports.probed == [[0, 1, 2, 3, 4, 5]]
    assert engine.calls == ["start person"]
    assert ("alice", "start", "started by a person", "done") in ports.audit


def test_a_wedged_card_latches_and_the_start_is_refused_with_the_way_out(rig: Rig) -> None:
    controller, ports, engine = rig.controller, rig.ports, rig.engine
    ports.wedged = frozenset({1})
    answer = controller.request_start(Trigger.START_REQUEST, "alice")
    assert not answer.started
    (refusal,) = answer.refusals
    assert refusal.code == "reboot_latch"
    assert "CUDA probe failed on card 1" in refusal.message
    assert "fleetctl reboot --confirm" in refusal.remedy
    assert ports.latched is not None and ports.latched.advice is Advice.WARM_REBOOT
    assert "start person" not in engine.calls
    # The latch now refuses at once, without another probe.
    again = controller.request_start(Trigger.START_REQUEST, "alice")
    assert [r.code for r in again.refusals] == ["reboot_latch"]
    assert len(ports.probed) == 1


def test_a_short_checkpoint_shard_refuses_the_start_before_any_card_is_probed(rig: Rig) -> None:
    """A launch that would die loading its weights never begins, and touches no card."""
    controller, ports, engine = rig.controller, rig.ports, rig.engine
    short = Reason("checkpoint", "checkpoint /m: model-00027-of-00046.safetensors: short")
    engine.blocks = (short,)
    answer = controller.request_start(Trigger.START_REQUEST, "alice")
    assert not answer.started
    assert [r.code for r in answer.refusals] == ["checkpoint"]
    assert "model-00027-of-00046.safetensors" in answer.refusals[0].message
    assert ports.probed == [] and engine.calls == []
    # The status's gate says the same before anyone presses Start.
    assert [r.code for r in controller.start_refusals()] == ["checkpoint"]
    # Copied again: the next start probes and starts.
    engine.blocks = ()
    assert controller.request_start(Trigger.START_REQUEST, "alice").started
    assert ports.probed == [list(range(8))]


def test_no_probe_beside_a_running_engine(rig: Rig) -> None:
    controller, ports, engine = rig.controller, rig.ports, rig.engine
    engine.running = True
    assert controller.request_start(Trigger.START_REQUEST, "alice", restart=True).started
    assert ports.probed == []
    assert engine.calls == ["restart"]


def test_a_refused_start_touches_nothing_and_says_every_reason(rig: Rig) -> None:
    controller, ports, engine = rig.controller, rig.ports, rig.engine
    engine.running = True
    ports.latched = LatchFact("Xid 79 on card 0")
    ports.rig_results = (CheckResult("vram_unlocked", 7, Severity.CRITICAL, "locked", "reload"),)
    answer = controller.request_start(Trigger.START_REQUEST, "alice", restart=True)
    assert not answer.started
    assert [r.code for r in answer.refusals] == ["reboot_latch", "critical_check"]
    assert "reboot required: Xid 79 on card 0" in answer.why_not
    assert engine.calls == []


def test_the_gate_is_asked_for_another_recipe_before_anything_moves(rig: Rig) -> None:
    """A switch asks what the gate refuses for the profile it is about to start, first."""
    controller, ports, engine = rig.controller, rig.ports, rig.engine
    engine.running = True
    ports.rig_results = (CheckResult("vram_unlocked", 7, Severity.CRITICAL, "locked", "reload"),)
    # The profile in force (every card) is refused for card 7; one on cards 0-5 is not.
    assert [r.code for r in controller.start_refusals()] == ["critical_check"]
    assert controller.start_refusals(frozenset(range(6)), ()) == ()
    errors = controller.start_refusals(frozenset(range(6)), ("bad flag",))
    assert [(r.code, r.message) for r in errors] == [("lint", "recipe: bad flag")]
    ports.latched = LatchFact("Xid 79 on card 0")
    codes = [r.code for r in controller.start_refusals(frozenset(range(6)), ())]
    assert codes == ["reboot_latch"]
    assert engine.calls == [] and ports.probed == [] and ports.audit == []


def test_the_mechanics_warnings_go_with_the_start(rig: Rig) -> None:
    controller, ports, engine = rig.controller, rig.ports, rig.engine
    held = Reason("foreign_gpu_processes", "pid 5151 (python3 bench.py) holds card 7")

    def start(reason: str, kind: StartFor) -> Launched:
        engine.calls.append(f"start {kind}")
        return Launched(42, warnings=(held,))

    engine.start = start  # type: ignore[method-assign]
    answer = controller.request_start(Trigger.START_REQUEST, "alice")
    assert answer.started and answer.warnings == (held,)
    (row,) = [row for row in ports.audit if row[1] == "start"]
    assert row[3] == f"done, with warnings: {held.message}"


def test_a_lost_card_latches_once_however_many_polls_see_it(rig: Rig) -> None:
    controller, ports, engine = rig.controller, rig.ports, rig.engine
    engine.running = True
    lost = make_card(3, lost=True, lost_kind=LostKind.RESET_REQUIRED, lost_reason="NVML 16")
    snapshot = RigSnapshot(BOOT_AT, 0.0, (make_card(0), lost))
    controller.on_snapshot(snapshot)
    controller.on_snapshot(snapshot)
    drain(controller)
    assert ports.latched is not None
    assert (
        ports.latched.reason
        == "card 3 needs a reset (NVML: reset required; a reboot on these cards)"
    )
    assert [c for c in engine.calls if c.startswith("stop")] == [f"stop: {ports.latched.reason}"]


def test_an_exit_is_answered_with_a_backoff_and_its_end_with_a_restart(rig: Rig) -> None:
    controller, engine = rig.controller, rig.engine
    controller.on_engine_exit(
        EngineExit(CrashClass.UNKNOWN, None, 9, "engine was killed by signal 9")
    )
    drain(controller)
    assert engine.calls == ["restart_after 5"]
    assert controller.streak.failures_in_a_row == 1
    controller.on_backoff_due()
    drain(controller)
    assert engine.calls[-1] == "start restart"


def test_the_clear_waives_what_was_seen_and_runs_the_checks_again(rig: Rig) -> None:
    controller, ports = rig.controller, rig.ports
    ports.latched = LatchFact("Xid 31 on card 1")
    answer = controller.clear("the card was checked", "alice")
    assert answer["cleared"] is True
    assert ports.latched is None
    assert ports.rejudged == 1
    assert ports.audit[-1][:3] == ("alice", "clear_latch", "the card was checked")


def test_a_fault_again_after_the_warm_reboot_asks_for_a_cold_power_cycle(rig: Rig) -> None:
    controller, ports = rig.controller, rig.ports
    ports.wedged = frozenset({2})
    controller.probe("after an Xid")
    drain(controller)
    assert ports.latched is not None and ports.latched.advice is Advice.WARM_REBOOT
    controller.history.note_reboot(cold=False)
    controller.new_boot("boot-2")
    ports.latched = None
    controller.probe("after the reboot")
    drain(controller)
    assert ports.latched is not None
    assert ports.latched.advice is Advice.COLD_POWER_CYCLE
    assert "the warm reboot at" in ports.latched.reason
    # A cold power cycle since did not help either: the card out, never a warm reboot.
    controller.history.note_reboot(cold=True)
    controller.new_boot("boot-3")
    ports.latched = None
    controller.probe("after the power cycle")
    drain(controller)
    assert ports.latched is not None and ports.latched.advice is Advice.TAKE_CARD_OUT
    assert ports.latched.card == 2
    assert "after 1 warm reboot and 1 cold power cycle" in ports.latched.reason


def test_a_diagnostic_holding_the_cards_refuses_starts_and_stops_probes(rig: Rig) -> None:
    controller, ports, engine = rig.controller, rig.ports, rig.engine
    with controller.starts.cards_held("the memory test"):
        answer = controller.request_start(Trigger.START_REQUEST, "alice")
        assert not answer.started
        (refusal,) = answer.refusals
        assert refusal.code == "cards_busy"
        assert refusal.message == "the memory test has the cards to itself"
        assert controller.probe("after Xid 13 with the engine stopped") is None
        with pytest.raises(Busy), controller.starts.cards_held("another test"):
            pytest.fail("a second diagnostic got the cards")  # one at a time
    assert ports.probed == [] and engine.calls == []
    assert controller.request_start(Trigger.START_REQUEST, "alice").started
    assert ports.probed == [list(range(8))]


@dataclass
class SlowHost(Ports):
    """A reboot command that runs until the test lets it end, counting its runs."""

    release: threading.Event = field(default_factory=threading.Event)
    running: threading.Event = field(default_factory=threading.Event)
    runs: int = 0

    def describe(self, cold: bool) -> str | None:
        return "systemctl reboot"

    def run(self, cold: bool) -> str:
        self.runs += 1
        self.running.set()
        assert self.release.wait(10)
        return "systemctl reboot"


def test_concurrent_confirmed_reboots_run_one_and_refuse_the_others_naming_it() -> None:
    ports = SlowHost(rig_cards=tuple(make_card(i) for i in range(4)))
    controller, _ = standalone_recovery(RecoverySettings(), ports)
    controller.attach_engine(Engine(running=True))
    answers: list[object] = []
    first = threading.Thread(target=lambda: answers.append(controller.reboot(True, "alice")))
    first.start()
    try:
        assert ports.running.wait(10)
        for actor in ("bob", "carol"):
            with pytest.raises(Conflict) as refused:
                controller.reboot(True, actor)
            assert refused.value.code == "reboot_busy"
            assert "reboot asked by alice" in refused.value.message
    finally:
        ports.release.set()
        first.join(10)
        controller.close()
    assert ports.runs == 1
    assert answers and answers[0]["done"] is True  # type: ignore[index]


def test_a_refused_start_is_kept_with_every_code_until_a_start_is_made(rig: Rig) -> None:
    controller, ports = rig.controller, rig.ports
    ports.latched = LatchFact("Xid 79 on card 0")
    ports.rig_results = (CheckResult("vram_unlocked", 7, Severity.CRITICAL, "locked", "reload"),)
    answer = controller.request_start(Trigger.BRING_UP, "fleetd")
    kept = controller.last_refused_start
    assert kept is not None and kept.trigger == Trigger.BRING_UP and kept.actor == "fleetd"
    assert [r.code for r in kept.reasons] == ["reboot_latch", "critical_check"]
    bring_up = controller.record_bring_up("boot-2", "engine not started", answer)
    assert [r["code"] for r in bring_up["refusals"]] == ["reboot_latch", "critical_check"]
    ports.latched, ports.rig_results = None, ()
    assert controller.request_start(Trigger.START_REQUEST, "alice").started
    assert controller.last_refused_start is None
