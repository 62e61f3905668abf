"""Executors against recording stand-ins for the daemon's side of each protocol.

The end-to-end path (real fleetd, real engine process, real store) is tested in
tests/daemon; here each decision's mechanics and the audit trail are checked one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from recovery.decisions import (
    Advice,
    Hold,
    NoAction,
    Reason,
    Refuse,
    RestartAfter,
    Start,
    StopAndLatch,
)
from recovery.executors import Executors


@dataclass
class Rig:
    """Records every call; ``stops`` says whether the engine agrees to stop."""

    stops: bool = True
    calls: list[str] = field(default_factory=list)
    audit: list[tuple[str, str, str, str]] = field(default_factory=list)
    latch: str | None = None

    def stop_cleanly(self, reason: str) -> bool:
        self.calls.append(f"stop: {reason}")
        return self.stops

    def start(self, reason: str) -> None:
        self.calls.append(f"start: {reason}")

    def hold(self, reason: str) -> None:
        self.calls.append(f"hold: {reason}")

    def restart_after(self, delay_s: float, reason: str) -> None:
        self.calls.append(f"restart_after {delay_s:g}")

    def set_latch(self, reason: str, advice: str) -> None:
        self.calls.append("set_latch")
        self.latch = self.latch or f"{reason} -> {advice}"

    def clear_latch(self, reason: str, by: str) -> bool:
        was_set = self.latch is not None
        self.latch = None
        self.calls.append(f"clear_latch by {by}")
        return was_set

    def record(self, actor: str, action: str, reason: str, result: str) -> None:
        self.audit.append((actor, action, reason, result))

    def describe(self) -> str:
        return "systemctl reboot"

    def reboot(self) -> str:
        self.calls.append("reboot")
        return "systemctl reboot"


def executors(rig: Rig, dry_run: bool = False) -> Executors:
    return Executors(rig, rig, rig, rig, dry_run=dry_run)


LATCH = StopAndLatch("Xid 119 on card 2: GSP RPC timeout", Advice.COLD_POWER_CYCLE, 2)


def test_stop_and_latch_latches_first_then_stops_with_the_advice() -> None:
    rig = Rig()
    outcome = executors(rig).carry_out(LATCH)
    assert outcome.done
    assert rig.calls == ["set_latch", "stop: Xid 119 on card 2: GSP RPC timeout"]
    assert rig.latch is not None
    assert "30 s" in rig.latch
    assert rig.audit == [("recovery", "stop_and_latch", LATCH.reason, "latch set, engine stopped")]


def test_an_engine_that_will_not_stop_still_latches_and_says_so() -> None:
    rig = Rig(stops=False)
    outcome = executors(rig).carry_out(LATCH)
    assert not outcome.done
    assert rig.latch is not None
    assert rig.audit[0][3] == "latch set; the engine would not stop (a person must stop it)"


def test_dry_run_records_every_decision_and_touches_nothing() -> None:
    rig = Rig()
    runner = executors(rig, dry_run=True)
    for decision in (LATCH, Start("autostart"), RestartAfter(10, 1, "crash"), Hold("breaker")):
        assert not runner.carry_out(decision).done
    assert rig.calls == []
    assert [row[1] for row in rig.audit] == ["stop_and_latch", "start", "restart_after", "hold"]
    assert {row[3] for row in rig.audit} == {"dry run: decided, not carried out"}
    assert not runner.reboot("alice").done
    assert rig.calls == []


def test_mechanical_decisions_reach_the_engine() -> None:
    rig = Rig()
    runner = executors(rig)
    runner.carry_out(Start("autostart"))
    runner.carry_out(RestartAfter(20.0, 2, "engine ended"))
    runner.carry_out(Hold("5 restarts"))
    runner.carry_out(Refuse((Reason("reboot_latch", "reboot required"),)))
    runner.carry_out(NoAction("nothing"))
    assert rig.calls == ["start: autostart", "restart_after 20", "hold: 5 restarts"]
    assert [row[1] for row in rig.audit] == ["start", "restart_after", "hold", "refuse"]


def test_a_confirmed_reboot_runs_only_after_a_clean_stop() -> None:
    rig = Rig()
    outcome = executors(rig).reboot("alice")
    assert outcome.done
    assert rig.calls == ["stop: reboot confirmed by a person", "reboot"]
    assert rig.audit[-1] == ("alice", "reboot", "confirmed by a person", "ran systemctl reboot")

    stuck = Rig(stops=False)
    outcome = executors(stuck).reboot("alice")
    assert not outcome.done
    assert "reboot" not in stuck.calls
    assert "would not stop" in outcome.message


def test_the_explanation_names_the_command_and_the_clean_stop() -> None:
    text = executors(Rig()).explain_reboot()
    assert "systemctl reboot" in text
    assert "never SIGKILL" in text


def test_clearing_the_latch_needs_a_reason_and_is_recorded() -> None:
    rig = Rig(latch="Xid 31")
    runner = executors(rig)
    assert not runner.clear_latch("  ", "alice").done
    assert rig.latch == "Xid 31"
    outcome = runner.clear_latch("card replaced", "alice")
    assert outcome.done
    assert rig.latch is None
    assert rig.audit[-1] == ("alice", "clear_latch", "card replaced", "latch cleared")
    assert not runner.clear_latch("again", "alice").done
