"""The recovery policy, table-driven: every catalogue entry and each kind of fact."""

from __future__ import annotations

import pytest

from hwcheck.kernellog.catalogue import DEFAULT_ENTRIES, XidCatalogue, XidOverride
from hwcheck.model import CheckResult, LostKind, Severity, XidAction, XidClass
from hwcheck.recovery_actions import RECOVERY_ACTIONS
from recovery.decisions import (
    Advice,
    AdviseInspection,
    Hold,
    NoAction,
    Refuse,
    RestartAfter,
    Start,
    StopAndLatch,
)
from recovery.facts import (
    CardFault,
    CardProbe,
    EngineCondition,
    EngineExit,
    Facts,
    LatchFact,
    PastFault,
    PolicySettings,
    ProbeOutcome,
    Trigger,
    XidFact,
)
from recovery.policy import backoff_delay_s, decide
from serving.runtime.classify import CrashClass

NOW_S = 10_000.0
CATALOGUE = XidCatalogue()


def xid_fact(
    xid: int, message: str = "", card: int | None = 1, catalogue: XidCatalogue = CATALOGUE
) -> XidFact:
    return XidFact(catalogue.info(xid, message), card=card)


def on_xid(*facts: XidFact, engine: EngineCondition = EngineCondition.RUNNING) -> Facts:
    return Facts(trigger=Trigger.XID, engine=engine, new_xids=facts)


# Every catalogue row, and every Xid AWS's node agent calls critical
# (docs/domain.md "What peers treat as critical").
AWS_CRITICAL = (
    46,
    48,
    54,
    62,
    63,
    64,
    74,
    79,
    95,
    109,
    110,
    119,
    120,
    136,
    140,
    142,
    143,
    151,
    155,
    156,
    158,
)


def expected_for(info_class: XidClass, action: XidAction) -> type:
    """Written out from docs/architecture.md "Recovery rules" (3), not from ``XidInfo.latches``."""
    if action in (XidAction.REBOOT, XidAction.COLD_POWER_CYCLE):
        return StopAndLatch
    if info_class is XidClass.HARDWARE and action is not XidAction.NONE:
        return StopAndLatch
    if info_class is XidClass.UNKNOWN:
        return AdviseInspection
    return NoAction


@pytest.mark.parametrize("entry", DEFAULT_ENTRIES, ids=lambda e: f"xid{e.xid}")
def test_every_catalogue_entry_gets_the_decision_its_class_and_action_call_for(
    entry: object,
) -> None:
    xid = entry.xid  # type: ignore[attr-defined]
    info = CATALOGUE.info(xid)
    decision = decide(on_xid(xid_fact(xid)), NOW_S)
    assert isinstance(decision, expected_for(info.xid_class, info.action))
    if isinstance(decision, StopAndLatch):
        cold = info.action is XidAction.COLD_POWER_CYCLE
        assert decision.advice is (Advice.COLD_POWER_CYCLE if cold else Advice.WARM_REBOOT)
        assert decision.card == 1
        # The headline: what and where, short; the explanation is shown once elsewhere.
        assert decision.reason == f"Xid {xid} ({info.title}) on card 1"
        assert len(decision.reason) <= 80 and info.explanation not in decision.reason


@pytest.mark.parametrize("xid", AWS_CRITICAL)
def test_the_cloud_fleets_critical_xids_are_all_known(xid: int) -> None:
    assert CATALOGUE.info(xid).xid_class is not XidClass.UNKNOWN


@pytest.mark.parametrize("code", sorted(RECOVERY_ACTIONS))
def test_xid_154_follows_its_recovery_action_code(code: int) -> None:
    message = f"GPU recovery action changed from 0x0 (None) to 0x{code:x} (whatever the label)"
    info = CATALOGUE.info(154, message)
    decision = decide(on_xid(xid_fact(154, message)), NOW_S)
    assert isinstance(decision, expected_for(info.xid_class, info.action))
    if code == 0x7:
        assert isinstance(decision, StopAndLatch)
        assert decision.advice is Advice.COLD_POWER_CYCLE
    if code in (0x1, 0x2, 0x4, 0x6):
        assert isinstance(decision, StopAndLatch)
        assert decision.advice is Advice.WARM_REBOOT
    if code == 0x0:
        assert isinstance(decision, NoAction)


@pytest.mark.parametrize("xid", [62, 119, 120])
def test_gsp_and_pmu_faults_advise_a_cold_power_cycle(xid: int) -> None:
    decision = decide(on_xid(xid_fact(xid)), NOW_S)
    assert isinstance(decision, StopAndLatch)
    assert decision.advice is Advice.COLD_POWER_CYCLE
    assert "30 s" in decision.advice_text(engine_running=False)


def test_a_cold_power_cycle_outranks_a_warm_reboot_in_the_same_batch() -> None:
    decision = decide(on_xid(xid_fact(31, card=0), xid_fact(119, card=2)), NOW_S)
    assert isinstance(decision, StopAndLatch)
    assert decision.advice is Advice.COLD_POWER_CYCLE
    assert decision.card == 2


def test_an_override_to_application_class_lets_the_engine_run() -> None:
    relaxed = XidCatalogue(
        {31: XidOverride(xid_class=XidClass.APPLICATION, action=XidAction.RESTART_ENGINE)}
    )
    assert isinstance(decide(on_xid(xid_fact(31, catalogue=relaxed)), NOW_S), NoAction)


def test_an_unknown_xid_is_recorded_and_advised_for_inspection() -> None:
    decision = decide(on_xid(xid_fact(4242, card=3)), NOW_S)
    assert isinstance(decision, AdviseInspection)
    assert decision.card == 3
    assert "Xid 4242" in decision.reason


@pytest.mark.parametrize(
    ("fault", "advice"),
    [
        (CardFault(2, lost_kind=LostKind.GPU_IS_LOST), Advice.WARM_REBOOT),
        (CardFault(2, lost_kind=LostKind.RESET_REQUIRED), Advice.WARM_REBOOT),
        (CardFault(2, lost_kind=LostKind.NOT_ANSWERING), Advice.WARM_REBOOT),
        (CardFault(2, lost_kind=LostKind.UNKNOWN), Advice.WARM_REBOOT),
        (CardFault(2, recovery_action=1), Advice.WARM_REBOOT),
        (CardFault(2, recovery_action=2), Advice.WARM_REBOOT),
        (CardFault(2, recovery_action=4), Advice.WARM_REBOOT),
        (CardFault(2, recovery_action=3), Advice.WARM_REBOOT),
        (CardFault(2, recovery_action=6), Advice.WARM_REBOOT),
        (CardFault(2, recovery_action=7), Advice.COLD_POWER_CYCLE),
        (CardFault(2, recovery_action=5), Advice.WARM_REBOOT),  # unknown here: to inspect
    ],
)
def test_nvml_card_faults_stop_and_latch(fault: CardFault, advice: Advice) -> None:
    decision = decide(
        Facts(Trigger.CARD_FAULT, EngineCondition.RUNNING, card_faults=(fault,)), NOW_S
    )
    assert isinstance(decision, StopAndLatch)
    assert decision.advice is advice
    assert decision.card == 2


@pytest.mark.parametrize(
    ("facts", "what"),
    [
        (on_xid(xid_fact(79, card=3)), "Xid 79 (GPU has fallen off the bus)"),
        (
            Facts(Trigger.CARD_FAULT, card_faults=(CardFault(3, LostKind.GPU_IS_LOST),)),
            "NVML: GPU is lost",
        ),
        (
            Facts(Trigger.CARD_FAULT, card_faults=(CardFault(3, recovery_action=7),)),
            "NVML recovery action 7 (system reboot required)",
        ),
        (
            Facts(Trigger.PROBE, probes=(CardProbe(3, ProbeOutcome.FAILED, "E_DEVICES"),)),
            "CUDA probe failed",
        ),
        (
            Facts(Trigger.ENGINE_EXIT, engine_exit=EngineExit(CrashClass.DRIVER_POISONED)),
            "a poisoned CUDA driver",
        ),
    ],
)
def test_each_fault_carries_its_short_name_without_the_card(facts: Facts, what: str) -> None:
    """The card's fault history keeps ``what``: it is set here, never parsed from the reason."""
    decision = decide(facts, NOW_S)
    assert isinstance(decision, StopAndLatch)
    assert decision.what == what


@pytest.mark.parametrize("action", [None, 0])
def test_recovery_actions_that_ask_for_no_reset_do_not_latch(action: int | None) -> None:
    facts = Facts(
        Trigger.CARD_FAULT,
        EngineCondition.RUNNING,
        card_faults=(CardFault(0, recovery_action=action),),
    )
    assert isinstance(decide(facts, NOW_S), NoAction)


@pytest.mark.parametrize("code", [*sorted(RECOVERY_ACTIONS), 0x5, 0x1F])
def test_nvml_field_230_and_xid_154_judge_a_code_alike(code: int) -> None:
    """One table: the latch and its advice do not depend on how the code arrived."""
    by_field = decide(
        Facts(Trigger.CARD_FAULT, card_faults=(CardFault(2, recovery_action=code),)), NOW_S
    )
    message = f"GPU recovery action changed from 0x0 (None) to 0x{code:x} (label ignored)"
    by_xid = decide(on_xid(xid_fact(154, message, card=2)), NOW_S)
    assert isinstance(by_field, StopAndLatch) is isinstance(by_xid, StopAndLatch)
    if isinstance(by_field, StopAndLatch) and isinstance(by_xid, StopAndLatch):
        assert by_field.advice is by_xid.advice


@pytest.mark.parametrize(
    ("outcome", "latches"),
    [
        (ProbeOutcome.OK, False),
        (ProbeOutcome.UNAVAILABLE, False),
        (ProbeOutcome.FAILED, True),
        (ProbeOutcome.TIMED_OUT, True),
    ],
)
def test_a_failed_or_timed_out_cuda_probe_latches_and_no_driver_library_does_not(
    outcome: ProbeOutcome, latches: bool
) -> None:
    probe = CardProbe(1, outcome, "CUDA_ERROR_DEVICES_UNAVAILABLE" if latches else None)
    decision = decide(Facts(Trigger.PROBE, probes=(probe,)), NOW_S)
    assert isinstance(decision, StopAndLatch) is latches
    if latches:
        assert isinstance(decision, StopAndLatch)
        assert "card 1" in decision.reason


def test_a_poisoned_driver_crash_latches_instead_of_restarting() -> None:
    facts = Facts(Trigger.ENGINE_EXIT, engine_exit=EngineExit(CrashClass.DRIVER_POISONED, 1))
    decision = decide(facts, NOW_S)
    assert isinstance(decision, StopAndLatch)
    assert decision.advice is Advice.WARM_REBOOT


def test_an_xid_31_read_right_after_the_engine_died_latches_instead_of_restarting() -> None:
    facts = Facts(
        Trigger.ENGINE_EXIT,
        engine_exit=EngineExit(CrashClass.CUDA_FAULT, None, 11),
        new_xids=(xid_fact(31),),
    )
    assert isinstance(decide(facts, NOW_S), StopAndLatch)


@pytest.mark.parametrize(
    "crash", [*(c for c in CrashClass if c is not CrashClass.DRIVER_POISONED), None]
)
def test_an_application_crash_on_a_healthy_rig_restarts_with_backoff(
    crash: CrashClass | None,
) -> None:
    facts = Facts(Trigger.ENGINE_EXIT, engine_exit=EngineExit(crash, None, 9), failures_in_a_row=2)
    decision = decide(facts, NOW_S)
    assert isinstance(decision, RestartAfter)
    assert decision.failure_in_a_row == 3
    assert decision.delay_s == 40.0  # 10 * 2**(3-1)


@pytest.mark.parametrize(
    ("failure", "delay_s"),
    [(0, 10.0), (1, 10.0), (2, 20.0), (5, 160.0), (6, 300.0), (10_000, 300.0)],
)
def test_backoff_doubles_up_to_its_cap(failure: int, delay_s: float) -> None:
    assert backoff_delay_s(PolicySettings(), failure) == delay_s


def test_too_many_restarts_in_the_window_hold_the_engine() -> None:
    settings = PolicySettings(breaker_max_restarts=3, breaker_window_s=600.0)
    recent = (NOW_S - 500, NOW_S - 300, NOW_S - 10)
    facts = Facts(
        Trigger.ENGINE_EXIT,
        engine_exit=EngineExit(CrashClass.UNKNOWN),
        restart_times_s=recent,
        settings=settings,
    )
    decision = decide(facts, NOW_S)
    assert isinstance(decision, Hold)
    assert "3 restarts within 600 s" in decision.reason


def test_restarts_older_than_the_window_do_not_count() -> None:
    settings = PolicySettings(breaker_max_restarts=3, breaker_window_s=600.0)
    old = (NOW_S - 5000, NOW_S - 4000, NOW_S - 10)
    facts = Facts(
        Trigger.ENGINE_EXIT,
        engine_exit=EngineExit(CrashClass.UNKNOWN),
        restart_times_s=old,
        settings=settings,
    )
    assert isinstance(decide(facts, NOW_S), RestartAfter)


def test_no_restart_when_automatic_restarts_are_off() -> None:
    facts = Facts(
        Trigger.ENGINE_EXIT,
        engine_exit=EngineExit(CrashClass.UNKNOWN),
        settings=PolicySettings(restart_on_failure=False),
    )
    assert isinstance(decide(facts, NOW_S), NoAction)


def test_an_exit_while_the_latch_is_set_is_not_restarted() -> None:
    facts = Facts(
        Trigger.ENGINE_EXIT,
        engine_exit=EngineExit(CrashClass.UNKNOWN),
        latch=LatchFact("Xid 31 on card 1"),
    )
    decision = decide(facts, NOW_S)
    assert isinstance(decision, Refuse)
    assert [r.code for r in decision.reasons] == ["reboot_latch"]


STARTS = [Trigger.START_REQUEST, Trigger.AUTOSTART, Trigger.BRING_UP, Trigger.BACKOFF_DUE]


def check(check_id: str, severity: Severity, card: int | None = None) -> CheckResult:
    return CheckResult(check_id, card, severity, f"{check_id} is {severity}", f"fix {check_id}")


@pytest.mark.parametrize("trigger", STARTS)
def test_every_start_passes_the_same_gate(trigger: Trigger) -> None:
    facts = Facts(
        trigger,
        latch=LatchFact("Xid 79 on card 0"),
        checks=(CheckResult("vram_unlocked", 2, Severity.CRITICAL, "8192 MiB: locked"),),
    )
    decision = decide(facts, NOW_S)
    assert isinstance(decision, Refuse)
    assert [r.code for r in decision.reasons] == ["reboot_latch", "critical_check"]
    assert "(card 2)" in decision.reasons[1].message


@pytest.mark.parametrize("trigger", STARTS)
def test_a_healthy_rig_starts(trigger: Trigger) -> None:
    assert isinstance(decide(Facts(trigger), NOW_S), Start)


# (check results, the recipe's cards, refused by, warned about): what gates a start.
GATE_TABLE = [
    # a locked card among the recipe's cards refuses; on a card it does not use, it warns
    ((check("vram_unlocked", Severity.CRITICAL, 7),), None, ["vram_unlocked"], []),
    ((check("vram_unlocked", Severity.CRITICAL, 7),), frozenset(range(6)), [], ["vram_unlocked"]),
    ((check("vram_unlocked", Severity.CRITICAL, 5),), frozenset(range(6)), ["vram_unlocked"], []),
    # a rig-wide result gates whatever the cards
    ((check("card_count", Severity.CRITICAL),), frozenset({0, 1}), ["card_count"], []),
    # speed and hygiene problems warn, even when critical
    ((check("power_brake", Severity.CRITICAL, 0),), None, [], ["power_brake"]),
    ((check("power_cap", Severity.WARNING, 1),), None, [], ["power_cap"]),
    ((check("foreign_gpu_processes", Severity.WARNING),), None, [], ["foreign_gpu_processes"]),
    ((check("engine_output", Severity.CRITICAL),), None, [], ["engine_output"]),
    ((check("temperature", Severity.WARNING, 2),), None, [], ["temperature"]),
    ((check("temperature", Severity.CRITICAL, 2),), None, ["temperature"], []),
    # a warning of a gating check only warns; ok results say nothing
    ((check("xid_since_boot", Severity.WARNING, 1),), None, [], ["xid_since_boot"]),
    ((check("cuda_probe", Severity.OK, 1),), None, [], []),
    ((check("cuda_probe", Severity.CRITICAL, 1),), None, ["cuda_probe"], []),
    # the host checks (judged against the baseline) gate by default
    ((check("host_kernel", Severity.CRITICAL),), None, ["host_kernel"], []),
    ((check("kernel_cmdline", Severity.CRITICAL),), None, ["kernel_cmdline"], []),
    ((check("driver_module", Severity.CRITICAL, 3),), None, ["driver_module"], []),
    ((check("bar1", Severity.CRITICAL, 0),), None, ["bar1"], []),
    ((check("p2p", Severity.CRITICAL),), None, ["p2p"], []),  # critical: tensor parallel
    ((check("p2p", Severity.WARNING),), None, [], ["p2p"]),
    ((check("host_kernel", Severity.WARNING),), None, [], ["host_kernel"]),  # next boot
    # a cost in speed, not safety: they warn, even critical
    ((check("vbios", Severity.WARNING, 1),), None, [], ["vbios"]),
    ((check("clocks", Severity.WARNING, 1),), None, [], ["clocks"]),
    ((check("pcie_errors", Severity.CRITICAL, 2),), None, [], ["pcie_errors"]),
    # a card whose memory test failed gates the recipes that use it
    ((check("memtest", Severity.CRITICAL, 3),), None, ["memtest"], []),
    ((check("memtest", Severity.CRITICAL, 7),), frozenset(range(6)), [], ["memtest"]),
]


@pytest.mark.parametrize(("checks", "cards", "refused", "warned"), GATE_TABLE)
def test_the_gate_refuses_on_what_is_unsafe_and_warns_about_the_rest(
    checks: tuple[CheckResult, ...],
    cards: frozenset[int] | None,
    refused: list[str],
    warned: list[str],
) -> None:
    decision = decide(Facts(Trigger.START_REQUEST, checks=checks, recipe_cards=cards), NOW_S)
    if refused:
        assert isinstance(decision, Refuse)
        assert [r.message.split(" ")[0].split(":")[0] for r in decision.reasons] == refused
        assert all(r.remedy.startswith("fix ") for r in decision.reasons)
    else:
        assert isinstance(decision, Start)
        assert [w.message.split(" ")[0].split(":")[0] for w in decision.warnings] == warned


def test_gate_checks_choose_what_refuses() -> None:
    brake = (check("power_brake", Severity.CRITICAL, 0),)
    strict = PolicySettings(gate_checks=frozenset({"power_brake"}))
    assert isinstance(
        decide(Facts(Trigger.AUTOSTART, checks=brake, settings=strict), NOW_S), Refuse
    )
    lax = PolicySettings(gate_checks=frozenset())
    locked = (check("vram_unlocked", Severity.CRITICAL, 1),)
    assert isinstance(decide(Facts(Trigger.AUTOSTART, checks=locked, settings=lax), NOW_S), Start)


def test_the_latch_always_gates_and_says_the_way_out() -> None:
    for advice, way in (
        (Advice.WARM_REBOOT, "reboot --confirm"),
        (Advice.COLD_POWER_CYCLE, "--cold"),
    ):
        facts = Facts(
            Trigger.START_REQUEST,
            latch=LatchFact("Xid 31 on card 1", advice),
            settings=PolicySettings(gate_checks=frozenset()),
        )
        decision = decide(facts, NOW_S)
        assert isinstance(decision, Refuse)
        (reason,) = decision.reasons
        assert reason.code == "reboot_latch"
        assert reason.message == "reboot required: Xid 31 on card 1"
        assert way in reason.remedy and "clear-reboot-latch --reason" in reason.remedy


@pytest.mark.parametrize("trigger", STARTS)
def test_no_start_while_a_diagnostic_has_the_cards(trigger: Trigger) -> None:
    decision = decide(Facts(trigger, cards_held_by="the memory test"), NOW_S)
    assert isinstance(decision, Refuse)
    (reason,) = decision.reasons
    assert reason.code == "cards_busy"
    assert reason.message == "the memory test has the cards to itself"


def test_lint_errors_refuse_a_start() -> None:
    facts = Facts(Trigger.START_REQUEST, recipe_errors=("layer-partition-sum: 40 != 43",))
    decision = decide(facts, NOW_S)
    assert isinstance(decision, Refuse)
    assert [r.code for r in decision.reasons] == ["lint"]


# (earlier faults of the card, the setting, the advice now): escalation to a cold cycle.
ESCALATION_TABLE = [
    ((), 1, Advice.WARM_REBOOT),
    ((PastFault(1, 1, "Xid 31 on card 1", "t0", "t1"),), 1, Advice.COLD_POWER_CYCLE),
    ((PastFault(1, 2, "Xid 31 on card 1", "t0", "t1"),), 1, Advice.WARM_REBOOT),
    ((PastFault(1, 2, "Xid 31 on card 1", "t0", "t1"),), 2, Advice.COLD_POWER_CYCLE),
    ((PastFault(1, 1, "Xid 31 on card 1", "t0", "t1"),), 0, Advice.WARM_REBOOT),
    ((PastFault(2, 1, "Xid 31 on card 2", "t0", "t1"),), 1, Advice.WARM_REBOOT),  # another card
    # After a cold power cycle too: the next rung (the card out), never a warm reboot again.
    ((PastFault(1, 1, "Xid 79", "t0", "t1", power_cycled=True),), 1, Advice.TAKE_CARD_OUT),
]


@pytest.mark.parametrize(("past", "within", "advice"), ESCALATION_TABLE)
def test_a_fault_again_after_a_warm_reboot_escalates_to_a_cold_power_cycle(
    past: tuple[PastFault, ...], within: int, advice: Advice
) -> None:
    facts = Facts(
        Trigger.XID,
        new_xids=(xid_fact(31, card=1),),
        past_faults=past,
        settings=PolicySettings(escalate_within_boots=within),
    )
    decision = decide(facts, NOW_S)
    assert isinstance(decision, StopAndLatch)
    assert decision.advice is advice
    if advice is Advice.COLD_POWER_CYCLE:
        assert "had a hardware fault" in decision.reason and "t0" in decision.reason
        assert "the warm reboot at t1 after it did not help" in decision.reason


def test_lost_cards_and_failed_probes_escalate_too() -> None:
    past = (PastFault(0, 1, "card 0 is lost", "t0", "t1"),)
    for fault in (
        Facts(
            Trigger.CARD_FAULT, card_faults=(CardFault(0, LostKind.GPU_IS_LOST),), past_faults=past
        ),
        Facts(Trigger.PROBE, probes=(CardProbe(0, ProbeOutcome.FAILED),), past_faults=past),
    ):
        decision = decide(fault, NOW_S)
        assert isinstance(decision, StopAndLatch)
        assert decision.advice is Advice.COLD_POWER_CYCLE


def test_a_run_ready_long_enough_starts_a_new_streak() -> None:
    settings = PolicySettings(backoff_reset_after_s=600.0)
    for ready_s, failure in ((None, 4), (599.0, 4), (600.0, 1), (3600.0, 1)):
        exit_ = EngineExit(CrashClass.UNKNOWN, ready_for_s=ready_s)
        facts = Facts(
            Trigger.ENGINE_EXIT, engine_exit=exit_, failures_in_a_row=3, settings=settings
        )
        decision = decide(facts, NOW_S)
        assert isinstance(decision, RestartAfter)
        assert decision.failure_in_a_row == failure, ready_s


def test_autostart_respects_a_persons_stop_and_the_switch() -> None:
    assert isinstance(decide(Facts(Trigger.AUTOSTART, operator_hold=True), NOW_S), NoAction)
    assert isinstance(
        decide(Facts(Trigger.AUTOSTART, settings=PolicySettings(autostart=False)), NOW_S), NoAction
    )
    assert isinstance(decide(Facts(Trigger.AUTOSTART, EngineCondition.RUNNING), NOW_S), NoAction)
    assert isinstance(decide(Facts(Trigger.BRING_UP, operator_hold=True), NOW_S), NoAction)
    # A person's own start is not blocked by their earlier stop.
    assert isinstance(decide(Facts(Trigger.START_REQUEST, operator_hold=True), NOW_S), Start)


def test_the_policy_cannot_express_a_forbidden_move() -> None:
    from recovery import decisions

    names = " ".join(dir(decisions)).lower()
    for forbidden in ("rmmod", "modprobe", "reload", "gpu_reset", "kill"):
        assert forbidden not in names


@pytest.mark.parametrize("xid_class", list(XidClass))
@pytest.mark.parametrize("action", list(XidAction))
def test_one_answer_per_xid_the_check_and_the_policy_agree(
    xid_class: XidClass, action: XidAction
) -> None:
    """A ``[xid.N]`` override of any class and action: critical exactly when it latches."""
    from hwcheck.checks.xid_since_boot import xid_severity
    from hwcheck.model import ClassifiedXid, XidEvent, XidInfo

    info = XidInfo(77, xid_class, action, "an override")
    decision = decide(on_xid(XidFact(info, card=0)), NOW_S)
    item = ClassifiedXid(XidEvent(77, "NVRM: Xid (PCI:0000:01:00): 77", "m"), info)
    assert isinstance(decision, StopAndLatch) is info.latches
    assert (xid_severity(item) is Severity.CRITICAL) is info.latches
    assert expected_for(xid_class, action) is StopAndLatch or not info.latches
    if isinstance(decision, StopAndLatch):
        assert decision.advice is info.advice


def test_a_card_of_another_engine_warns_that_engine_not_this_one() -> None:
    """Several engines (issue 42): a brake on card 6 is the 4-7 engine's warning alone."""
    brake = (check("power_brake", Severity.CRITICAL, 6),)
    low, high = frozenset(range(4)), frozenset(range(4, 8))
    for_low = decide(
        Facts(Trigger.START_REQUEST, checks=brake, recipe_cards=low, others_cards=high), NOW_S
    )
    for_high = decide(
        Facts(Trigger.START_REQUEST, checks=brake, recipe_cards=high, others_cards=low), NOW_S
    )
    assert isinstance(for_low, Start) and for_low.warnings == ()
    assert isinstance(for_high, Start)
    assert [w.message.split(" ")[0] for w in for_high.warnings] == ["power_brake"]
    # A rig-wide fault refuses both; a card no engine uses still warns each.
    rig_wide = (check("card_count", Severity.CRITICAL),)
    for cards, others in ((low, high), (high, low)):
        refused = decide(
            Facts(Trigger.START_REQUEST, checks=rig_wide, recipe_cards=cards, others_cards=others),
            NOW_S,
        )
        assert isinstance(refused, Refuse)
    spare = (check("power_brake", Severity.CRITICAL, 6),)
    alone = decide(
        Facts(Trigger.START_REQUEST, checks=spare, recipe_cards=low, others_cards=frozenset({4})),
        NOW_S,
    )
    assert isinstance(alone, Start) and len(alone.warnings) == 1
