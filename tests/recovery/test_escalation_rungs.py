"""The latch's rungs (warm reboot, cold power cycle, the card out) on every surface.

After the escalation every host step reads the latch's rung (a check's fix line, the
latch's advice, the dry run), a warm ``reboot --confirm`` under a colder rung is refused
unless forced, and a card that faults again after a cold power cycle is named, with the
attempts counted, never sent back to a warm reboot.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hwcheck.advice import ACTION_STEPS, ADVICE_STEPS, RigNow
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.model import Advice, XidAction
from recovery.decisions import StopAndLatch
from recovery.executors import Executors
from recovery.facts import Facts, LatchFact, PastFault, PolicySettings, Trigger, XidFact
from recovery.history import FaultHistory
from recovery.policy import decide
from tests.support.recovery_ports import MemoryPorts

NOW_S = 10_000.0
XID31 = XidCatalogue().info(31, "")


def _xid31(card: int) -> XidFact:
    return XidFact(XID31, card=card)


def _decide(past: tuple[PastFault, ...], within: int = 1) -> StopAndLatch:
    facts = Facts(
        Trigger.XID,
        new_xids=(_xid31(1),),
        past_faults=past,
        settings=PolicySettings(escalate_within_boots=within),
    )
    decision = decide(facts, NOW_S)
    assert isinstance(decision, StopAndLatch)
    return decision


def test_a_fault_after_a_cold_power_cycle_takes_the_card_out_counting_the_attempts() -> None:
    past = (
        PastFault(1, 1, "Xid 31 (MMU page fault)", "t1", "t2", True, 1, 1),
        PastFault(1, 2, "Xid 31 (MMU page fault)", "t0", "t1", True, 2, 1),
    )
    decision = _decide(past)
    assert decision.advice is Advice.TAKE_CARD_OUT
    assert decision.card == 1
    assert "faulted again after 2 warm reboots and 1 cold power cycle" in decision.reason
    assert "first Xid 31 (MMU page fault), at t0" in decision.reason
    text = decision.advice_text(engine_running=False)
    assert text.startswith("take card 1 out:") and "fleetctl serve PROFILE" in text
    assert "reseat or replace" in text and "reboot --confirm" not in text


def test_one_warm_reboot_and_one_cold_cycle_read_as_such_and_never_warm_again() -> None:
    past = (
        PastFault(1, 1, "Xid 31", "t1", "t2", power_cycled=True, cold_cycles=1),
        PastFault(1, 2, "Xid 31", "t0", "t1", True, 1, 1),
    )
    decision = _decide(past)
    assert "faulted again after 1 warm reboot and 1 cold power cycle" in decision.reason
    # However far the policy is asked, the rung never falls back to a warm reboot.
    for within in (1, 2, 5):
        assert _decide(past, within).advice is Advice.TAKE_CARD_OUT


def test_a_fault_far_back_after_a_quiet_run_starts_no_chain() -> None:
    past = (PastFault(1, 3, "Xid 31", "t0", "t1", True, 2, 1),)
    assert _decide(past, within=1).advice is Advice.WARM_REBOOT


def test_the_history_counts_the_warm_reboots_and_cold_cycles_since_each_fault() -> None:
    ports = MemoryPorts()
    history = FaultHistory(ports)
    history.new_boot("b0", "t0")
    history.record(1, "Xid 31", "t0")
    history.note_reboot(cold=False)
    history.new_boot("b1", "t1")
    history.record(1, "Xid 31", "t1")
    history.note_reboot(cold=True)
    history.new_boot("b2", "t2")
    found = {p.boots_ago: p for p in history.past_faults()}
    assert (found[2].warm_reboots, found[2].cold_cycles, found[2].power_cycled) == (1, 1, True)
    assert (found[1].warm_reboots, found[1].cold_cycles, found[1].power_cycled) == (0, 1, True)
    facts = Facts(Trigger.XID, new_xids=(_xid31(1),), past_faults=history.past_faults())
    decision = decide(facts, NOW_S)
    assert isinstance(decision, StopAndLatch)
    assert decision.advice is Advice.TAKE_CARD_OUT
    assert "after 1 warm reboot and 1 cold power cycle" in decision.reason


def test_every_host_step_reads_the_latchs_rung() -> None:
    cold = RigNow(engine_running=False, latched=True, latch_advice=Advice.COLD_POWER_CYCLE)
    # The xid check's fix line for an Xid 31 (catalogue: a warm reboot) under a cold latch.
    assert ACTION_STEPS[XidAction.REBOOT].text(cold) == ADVICE_STEPS[Advice.COLD_POWER_CYCLE].text(
        cold
    )
    assert "--cold" in ACTION_STEPS[XidAction.REBOOT].text(cold)
    out = RigNow(False, latched=True, latch_advice=Advice.TAKE_CARD_OUT, latch_card=3)
    assert ACTION_STEPS[XidAction.REBOOT].text(out).startswith("take card 3 out")
    # No latch: the catalogue's own step; a step that is no host step keeps its words.
    assert "--cold" not in ACTION_STEPS[XidAction.REBOOT].text(RigNow(False))
    assert ACTION_STEPS[XidAction.NONE].text(cold) == "no action needed; watch for repeats"


def test_a_wrong_boot_entry_comes_first_in_a_reboots_step() -> None:
    now = RigNow(False, latched=True, latch_advice=Advice.WARM_REBOOT, wrong_boot="entry X")
    text = ADVICE_STEPS[Advice.WARM_REBOOT].text(now)
    assert text.startswith("fix the boot entry first (entry X")
    assert text.endswith("fleetctl reboot --confirm (the engine is already stopped)")


@dataclass
class _Host(MemoryPorts):
    """Memory ports with a host that can reboot and power-cycle."""

    ran: list[str] = field(default_factory=list)

    def describe(self, cold: bool) -> str | None:
        return "ipmitool chassis power cycle" if cold else "systemctl reboot"

    def run(self, cold: bool) -> str:
        self.ran.append("power_cycle" if cold else "reboot")
        return str(self.describe(cold))


def _executors(ports: _Host) -> Executors:
    history = FaultHistory(ports)
    history.new_boot("boot-1", "t0")
    return Executors(ports, ports, ports, history)


def test_a_warm_reboot_under_a_cold_latch_is_refused_unless_forced() -> None:
    ports = _Host(latched=LatchFact("Xid 31 on card 1; ...", Advice.COLD_POWER_CYCLE, 1))
    runner = _executors(ports)
    explained = runner.explain_reboot(cold=False)
    assert "the latch asks for more than a warm reboot" in explained
    assert "fleetctl reboot --confirm --cold" in explained
    assert runner.advised_flags() == "--confirm --cold"
    refused = runner.reboot("alice")
    assert not refused.done and ports.ran == []
    assert refused.refusals[0].code == "cold_advised"
    assert "--force" in refused.message and "--cold" in refused.message
    assert runner.reboot("alice", cold=True).done
    assert runner.reboot("alice", force=True).done
    assert ports.ran == ["power_cycle", "reboot"]


def test_a_warm_latch_lets_a_warm_reboot_go_and_no_latch_advises_nothing() -> None:
    ports = _Host(latched=LatchFact("Xid 31 on card 1", Advice.WARM_REBOOT, 1))
    runner = _executors(ports)
    assert runner.advised_flags() == "--confirm"
    assert runner.reboot("alice").done
    assert _executors(_Host()).advised_flags() is None
