"""xid_since_boot: per-card verdicts, counts, remedies, and the rig-wide leftovers."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from hwcheck.advice import RigNow
from hwcheck.model import LatchWaiver, Severity, XidAction, XidClass, xid_key
from tests.support.cards import bus_id, make_input, make_xid, result_for, results_for

XID = "xid_since_boot"
APP = {"xid_class": XidClass.APPLICATION, "action": XidAction.RESTART_ENGINE}


def test_no_xid_is_ok_for_every_card_and_the_rig() -> None:
    results = results_for(make_input(), "xid_since_boot")

    assert [(r.card, r.severity) for r in results] == [
        (0, Severity.OK),
        (1, Severity.OK),
        (2, Severity.OK),
        (3, Severity.OK),
        (None, Severity.OK),
    ]


def test_hardware_xid_is_critical_on_its_card_only() -> None:
    xids = [make_xid(31, bus_id(1)), make_xid(31, bus_id(1))]
    inp = make_input(xids=xids)

    result = result_for(inp, "xid_since_boot", 1)

    assert result.severity is Severity.CRITICAL
    assert result.message.startswith("card 1 (0000:02:00.0): 2 Xid since boot: 31 x2")
    assert "reboot the host" in result.remedy
    assert result_for(inp, "xid_since_boot", 0).severity is Severity.OK


@pytest.mark.parametrize(
    ("action", "running", "stopped"),
    [
        (XidAction.REBOOT, "it stops the engine cleanly first", "the engine is already stopped"),
        (XidAction.COLD_POWER_CYCLE, "stops the engine cleanly first", "already stopped"),
        (XidAction.RESTART_ENGINE, "restart the engine (fleetctl restart)", "(fleetctl start)"),
    ],
)
def test_the_remedy_is_worded_for_the_engine_running_or_stopped(
    action: XidAction, running: str, stopped: str
) -> None:
    xid_class = XidClass.APPLICATION if action is XidAction.RESTART_ENGINE else XidClass.HARDWARE
    inp = make_input(xids=[make_xid(31, bus_id(1), xid_class=xid_class, action=action)])
    while_running = result_for(replace(inp, rig_now=RigNow(engine_running=True)), XID, 1)
    once_stopped = result_for(replace(inp, rig_now=RigNow(engine_running=False)), XID, 1)

    assert running in while_running.remedy and stopped not in while_running.remedy
    assert stopped in once_stopped.remedy and running not in once_stopped.remedy


def test_a_restart_is_not_advised_while_the_latch_would_refuse_it() -> None:
    inp = make_input(xids=[make_xid(43, bus_id(3), **APP)])
    latched = replace(inp, rig_now=RigNow(engine_running=False, latched=True))

    assert "fleetctl start" not in result_for(latched, XID, 3).remedy
    assert "latch" in result_for(latched, XID, 3).remedy


@pytest.mark.parametrize(
    ("xid_class", "action", "severity", "remedy_words"),
    [
        (XidClass.HARDWARE, XidAction.COLD_POWER_CYCLE, Severity.CRITICAL, "power the rig off"),
        # an override to "no action" means what it says: it does not latch, a warning
        (XidClass.HARDWARE, XidAction.NONE, Severity.WARNING, "watch for repeats"),
        (XidClass.HARDWARE, XidAction.REBOOT, Severity.CRITICAL, "reboot the host"),
        (XidClass.HARDWARE, XidAction.INSPECT, Severity.CRITICAL, "inspect the kernel log"),
        (XidClass.DRIVER, XidAction.REBOOT, Severity.CRITICAL, "reboot the host"),
        (XidClass.DRIVER, XidAction.INSPECT, Severity.WARNING, "inspect"),
        (XidClass.APPLICATION, XidAction.RESTART_ENGINE, Severity.WARNING, "fleetctl restart"),
        (XidClass.APPLICATION, XidAction.NONE, Severity.WARNING, "watch for repeats"),
        (XidClass.UNKNOWN, XidAction.INSPECT, Severity.WARNING, "inspect"),
    ],
)
def test_class_and_action_decide(
    xid_class: XidClass, action: XidAction, severity: Severity, remedy_words: str
) -> None:
    inp = make_input(xids=[make_xid(62, bus_id(0), xid_class=xid_class, action=action)])

    result = result_for(inp, "xid_since_boot", 0)

    assert result.severity is severity
    assert remedy_words in result.remedy


def test_cold_power_cycle_remedy_is_exact() -> None:
    xid = make_xid(119, bus_id(2), action=XidAction.COLD_POWER_CYCLE)
    result = result_for(make_input(xids=[xid]), "xid_since_boot", 2)

    assert result.remedy.startswith("power the rig off for about 30 s, then on")
    assert "fleetctl reboot --confirm --cold" in result.remedy


def test_mixed_xids_counted_and_hardware_leads() -> None:
    xids = [
        make_xid(13, bus_id(0), **APP, explanation="graphics engine exception"),
        make_xid(31, bus_id(0), explanation="MMU fault: wedge precursor"),
        make_xid(13, bus_id(0), **APP, explanation="graphics engine exception"),
    ]
    result = result_for(make_input(xids=xids), "xid_since_boot", 0)

    assert result.severity is Severity.CRITICAL
    assert "3 Xid since boot: 13 x2, 31 x1" in result.message
    # The leading Xid's headline, never its explanation (the status holds that once).
    assert result.message.endswith("; Xid 31 (MMU fault)")
    assert "wedge precursor" not in result.message
    assert "reboot the host" in result.remedy


def test_application_only_is_a_warning_with_restart() -> None:
    result = result_for(make_input(xids=[make_xid(43, bus_id(3), **APP)]), "xid_since_boot", 3)

    assert result.severity is Severity.WARNING
    assert "1 Xid since boot: 43 x1" in result.message


def test_xids_without_or_with_unknown_address_go_to_the_rig_result() -> None:
    xids = [make_xid(79, None), make_xid(13, "0000:0a:00.0", **APP)]
    inp = make_input(xids=xids)

    rig = result_for(inp, "xid_since_boot", None)

    assert rig.severity is Severity.CRITICAL
    assert "0000:0a:00.0" in rig.message
    assert "no PCI address" in rig.message
    assert "2 Xid since boot: 79 x1, 13 x1" in rig.message
    assert all(r.severity is Severity.OK for r in results_for(inp, "xid_since_boot") if r.card)


def test_xids_a_person_waived_still_count_but_no_longer_refuse() -> None:
    """Clearing the latch waives the Xids seen before it: counted, shown cleared, a warning."""
    before = make_xid(31, bus_id(1))
    at = datetime(2026, 9, 29, 14, tzinfo=UTC)
    waiver = LatchWaiver("card reseated", at, frozenset({xid_key(before.event)}))
    result = result_for(make_input(xids=[before], waiver=waiver), "xid_since_boot", 1)
    assert result.severity is Severity.WARNING
    assert "1 Xid since boot: 31 x1" in result.message
    assert "cleared by 'card reseated' at 2026-09-29T14:00:00+00:00" in result.message
    assert result.remedy == "no action needed; watch for repeats"
    # A new one after the clear is critical again.
    after = make_xid(31, bus_id(1))
    after = replace(after, event=replace(after.event, text="a later kernel line"))
    again = result_for(make_input(xids=[before, after], waiver=waiver), "xid_since_boot", 1)
    assert again.severity is Severity.CRITICAL
    assert "2 Xid since boot" in again.message
