"""Executors against recording stand-ins for the daemon's side of each port.

The end-to-end path (real fleetd, real engine process, real store) is tested in
tests/daemon; here each decision's mechanics, the latch, dry run and the audit trail are
checked one by one.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hwcheck.model import Advice, LatchWaiver
from recovery.decisions import (
    Hold,
    NoAction,
    Reason,
    Refuse,
    RestartAfter,
    Start,
    StopAndLatch,
)
from recovery.executors import Context, Executors
from recovery.facts import LatchFact, Trigger
from recovery.history import FaultHistory
from recovery.ports import BeforeReboot, Launched
from tests.support.executor_rig import Rig


def executors(rig: Rig, dry_run: bool = False) -> Executors:
    history = FaultHistory(rig)
    history.new_boot("boot-1", "t0")
    runner = Executors(rig, rig, rig, history, dry_run=dry_run)
    runner.attach_engine(rig)
    return runner


LATCH = StopAndLatch(
    "Xid 119 on card 2: GSP RPC timeout", Advice.COLD_POWER_CYCLE, 2, "Xid 119 (GSP RPC timeout)"
)
ON_XID = Context(Trigger.XID)


def test_stop_and_latch_latches_first_then_stops_and_notes_the_cards_fault() -> None:
    rig = Rig()
    outcome = executors(rig).carry_out(LATCH, ON_XID)
    assert outcome.done
    assert rig.calls == ["set_latch", "stop: Xid 119 on card 2: GSP RPC timeout"]
    assert rig.latched == LatchFact(LATCH.reason, Advice.COLD_POWER_CYCLE, 2)
    assert "30 s" in outcome.message
    assert rig.audit == [("recovery", "stop_and_latch", LATCH.reason, "latch set, engine stopped")]
    assert rig.document is not None
    # The fault's short name as the policy named it, not parsed back from the reason.
    faults = [(f["card"], f["what"]) for f in rig.document["faults"]]
    assert faults == [(2, "Xid 119 (GSP RPC timeout)")]


def test_a_stop_queued_behind_its_latch_never_sets_it_again() -> None:
    """The latch is set when decided; a person may clear it before the queued stop runs.

    Seen in CI: the engine was already stopped, the person's clear came first, and the
    worker's stop set the latch again (undoing the clear, counting the fault twice).
    """
    rig = Rig()
    runner = executors(rig)
    assert runner.latch_now(LATCH)
    rig.latched = None  # the person's clear, before the worker runs the stop
    outcome = runner.carry_out(LATCH, Context(Trigger.XID, latched=True))
    assert outcome.done
    assert rig.latched is None
    assert rig.calls == ["set_latch", "stop: Xid 119 on card 2: GSP RPC timeout"]
    assert rig.document is not None and len(rig.document["faults"]) == 1


def test_an_engine_that_will_not_stop_still_latches_and_says_so() -> None:
    rig = Rig(stops=False)
    outcome = executors(rig).carry_out(LATCH, ON_XID)
    assert not outcome.done
    assert rig.latched is not None
    assert rig.audit[0][3] == "latch set; the engine would not stop (a person must stop it)"


def test_dry_run_records_repairs_touches_nothing_and_still_starts() -> None:
    rig = Rig()
    runner = executors(rig, dry_run=True)
    for decision in (LATCH, RestartAfter(10, 1, "crash"), Hold("breaker")):
        assert not runner.carry_out(decision, ON_XID).done
    assert not runner.latch_now(LATCH)
    assert rig.calls == [] and rig.latched is None
    assert [row[1] for row in rig.audit] == ["stop_and_latch", "restart_after", "hold"]
    assert {row[3] for row in rig.audit} == {"dry run: decided, not carried out"}
    assert not runner.reboot("alice").done
    assert rig.calls == []
    # A start is no repair: a person's, autostart's and the bring-up's still happen.
    assert runner.carry_out(Start("autostart"), Context(Trigger.AUTOSTART)).done
    assert rig.calls == ["start automatic: autostart"]


def test_a_repair_in_dry_run_after_an_exit_leaves_the_engine_stopped_saying_so() -> None:
    rig = Rig()
    executors(rig, dry_run=True).carry_out(
        RestartAfter(10, 1, "crash"), Context(Trigger.ENGINE_EXIT)
    )
    assert rig.calls == ["stay_stopped: dry run: decided restart_after (crash); not carried out"]


@pytest.mark.parametrize(
    ("trigger", "kind"),
    [
        (Trigger.START_REQUEST, "person"),
        (Trigger.AUTOSTART, "automatic"),
        (Trigger.BRING_UP, "automatic"),
        (Trigger.BACKOFF_DUE, "restart"),
    ],
)
def test_each_start_reaches_the_engine_as_its_kind(trigger: Trigger, kind: str) -> None:
    rig = Rig()
    outcome = executors(rig).carry_out(Start("why"), Context(trigger, actor="api"))
    assert outcome.done and outcome.launched == Launched(1234)
    assert rig.calls == [f"start {kind}: why"]
    assert rig.audit == [("api", "start", "why", "done")]


def test_a_persons_restart_goes_to_the_engine_as_one_restart() -> None:
    rig = Rig()
    warned = (Reason("critical_check", "power_brake (card 0): braking", "tape pin B30"),)
    outcome = executors(rig).carry_out(
        Start("started by a person", warned), Context(Trigger.START_REQUEST, "api", restart=True)
    )
    assert outcome.done
    assert rig.calls == ["restart: started by a person"]
    assert rig.audit[0][3].startswith("done, with warnings: power_brake (card 0): braking")


def test_a_refusal_of_the_mechanics_comes_back_with_its_code() -> None:
    rig = Rig(refuse_start="port 8000 on 127.0.0.1 is taken")
    outcome = executors(rig).carry_out(Start("why"), Context(Trigger.START_REQUEST))
    assert not outcome.done
    assert outcome.refusals == (Reason("port_in_use", "port 8000 on 127.0.0.1 is taken"),)


def test_every_reason_of_the_mechanics_comes_back_with_its_own_code() -> None:
    reasons = (
        Reason("port_in_use", "port 8000 on 127.0.0.1 is taken by pid 77"),
        Reason("engine_survivors", "pid 78 of the last engine still runs"),
    )
    rig = Rig(refuse_start="; ".join(r.message for r in reasons), refuse_reasons=reasons)
    outcome = executors(rig).carry_out(Start("why"), Context(Trigger.START_REQUEST))
    assert outcome.refusals == reasons


def test_answers_to_an_exit_or_a_backoff_reach_the_engine() -> None:
    rig = Rig()
    runner = executors(rig)
    exit_ = Context(Trigger.ENGINE_EXIT)
    runner.carry_out(RestartAfter(20.0, 2, "engine ended"), exit_)
    runner.carry_out(Hold("5 restarts"), exit_)
    runner.carry_out(NoAction("the host is rebooting"), exit_)
    refusal = Refuse((Reason("reboot_latch", "reboot required"),))
    runner.carry_out(refusal, Context(Trigger.BACKOFF_DUE))
    assert rig.calls == [
        "restart_after 20",
        "hold: 5 restarts",
        "stay_stopped: the host is rebooting",
        "stay_stopped: automatic restart refused: reboot required",
    ]
    assert [row[1] for row in rig.audit] == ["restart_after", "hold", "refuse"]


def test_a_confirmed_reboot_runs_only_after_a_clean_stop() -> None:
    rig = Rig()
    outcome = executors(rig).reboot("alice")
    assert outcome.done
    assert rig.calls == ["stop: reboot confirmed by a person", "reboot"]
    assert rig.audit[-1] == ("alice", "reboot", "confirmed by a person", "ran systemctl reboot")
    assert rig.document is not None and rig.document["pending_reboot"] == "warm"

    stuck = Rig(stops=False)
    outcome = executors(stuck).reboot("alice")
    assert not outcome.done
    assert "reboot" not in stuck.calls
    assert "would not stop" in outcome.message


class SidesThatStay:
    """A rig of two engines whose other engine would not stop before the reboot."""

    default_grace_s = 0.0

    def before_reboot(self, actor: str) -> BeforeReboot:
        return BeforeReboot(
            "no guard answers: nothing to drain; engine qwen not stopped", ("qwen",)
        )


def test_a_reboot_over_another_engine_that_would_not_stop_is_refused_and_this_one_serves() -> None:
    rig = Rig()
    runner = executors(rig)
    runner.attach_drain(SidesThatStay())
    outcome = runner.reboot("alice")
    assert not outcome.done
    assert outcome.message.startswith("engine qwen would not stop: not rebooting")
    assert rig.calls == []  # neither this engine's stop nor the reboot
    assert [row[1] for row in rig.audit] == ["drain", "reboot"]
    assert rig.audit[0][3].endswith("engine qwen not stopped")


WRONG_ENTRY = "the default boot entry boots 6.8.0-49-generic, not the baseline kernel 6.8.12"


@pytest.mark.parametrize("cold", [False, True])
def test_a_reboot_into_the_wrong_kernel_is_refused_before_anything_stops(cold: bool) -> None:
    rig = Rig(next_boot=WRONG_ENTRY, power_cycle="ipmitool chassis power cycle")
    explained = executors(rig).explain_reboot(cold)
    assert WRONG_ENTRY in explained and "--force" in explained
    outcome = executors(rig).reboot("alice", cold=cold)
    assert not outcome.done and rig.calls == []  # the engine was not even stopped
    (refusal,) = outcome.refusals
    assert refusal.code == "boot_entry"
    assert WRONG_ENTRY in outcome.message and "--force" in outcome.message
    assert rig.audit[-1][3].startswith("refused: " + WRONG_ENTRY)
    forced = executors(rig).reboot("alice", cold=cold, force=True)
    assert forced.done
    assert rig.calls[-1] == ("power_cycle" if cold else "reboot")
    assert rig.audit[-1][2] == "confirmed by a person (--force)"


def test_a_missing_reboot_program_is_refused_naming_it_even_with_force() -> None:
    missing = "[recovery] reboot_command: 'systemctl' is not an executable program on this host"
    rig = Rig(missing=missing)
    assert missing in executors(rig).explain_reboot(False)
    outcome = executors(rig).reboot("alice", force=True)
    assert not outcome.done and rig.calls == []
    assert outcome.refusals[0].code == "reboot_command"
    assert outcome.message.startswith(missing)


def test_a_cold_power_cycle_runs_its_own_command_or_explains_the_manual_way() -> None:
    rig = Rig(power_cycle="ipmitool chassis power cycle")
    outcome = executors(rig).reboot("alice", cold=True)
    assert outcome.done
    assert rig.calls == ["stop: power cycle confirmed by a person", "power_cycle"]
    assert rig.document is not None and rig.document["pending_reboot"] == "cold"

    none = Rig()
    outcome = executors(none).reboot("alice", cold=True)
    assert not outcome.done
    assert none.calls == [], "no stop when nothing can be power-cycled"
    assert "power_cycle_command" in outcome.message and "30 s" in outcome.message
    assert "power_cycle_command" in executors(none).explain_reboot(cold=True)


def test_the_explanation_names_the_command_and_the_clean_stop() -> None:
    text = executors(Rig()).explain_reboot(cold=False)
    assert "systemctl reboot" in text
    assert "never SIGKILL" in text


def test_clearing_the_latch_needs_a_reason_and_is_recorded() -> None:
    rig = Rig(latched=LatchFact("Xid 31"))
    runner = executors(rig)
    waiver = LatchWaiver("card replaced", datetime.now(UTC))
    assert not runner.clear_latch("  ", "alice", waiver).done
    assert rig.latched is not None
    outcome = runner.clear_latch("card replaced", "alice", waiver)
    assert outcome.done
    assert rig.latched is None
    assert rig.audit[-1][:3] == ("alice", "clear_latch", "card replaced")
    assert rig.audit[-1][3].startswith("latch cleared")
    assert not runner.clear_latch("again", "alice", waiver).done


class BrokenStore(Rig):
    """A latch that cannot be written (a full disk, a locked database)."""

    def set_latch(self, reason: str, advice: Advice, card: int | None = None) -> None:
        raise OSError("No space left on device")


def test_a_latch_that_cannot_be_written_does_not_keep_the_engine_running() -> None:
    rig = BrokenStore()
    executors(rig).carry_out(LATCH, ON_XID)
    assert rig.calls == ["stop: Xid 119 on card 2: GSP RPC timeout"]
