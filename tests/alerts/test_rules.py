"""Which stored events and states become alerts, with what fingerprint, severity and advice."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from daemon.alerts.rules import CHECK_TITLES, event_signals, latch_signal, unclean_stop_signal
from daemon.store.events import EventRow
from daemon.store.keyvalue import Latch
from hwcheck.model import Advice, EventKind, Severity

T0 = datetime(2026, 9, 29, 3, 0, tzinfo=UTC)


def event(kind: EventKind, severity: Severity, message: str = "m", **kw: Any) -> EventRow:
    return EventRow(id=1, ts=T0, kind=kind, severity=severity, message=message, **kw)


def test_xids_alert_per_card_and_class_with_the_catalogues_advice() -> None:
    xid = event(
        EventKind.XID,
        Severity.CRITICAL,
        xid=79,
        card=1,
        pci_bus_id="0000:21:00.0",
        details={"class": "hardware", "action": "reboot", "title": "GPU has fallen off the bus"},
    )
    (signal,) = event_signals(xid)
    assert signal.fire and signal.fingerprint == "xid:hardware:0000:21:00.0"
    assert signal.severity is Severity.CRITICAL
    # The headline and one step; recovery has stopped the engine by the time it is read.
    assert signal.summary == "Xid 79 (GPU has fallen off the bus) on card 1"
    assert (
        signal.advice
        == "Reboot the host: fleetctl reboot --confirm (the engine is already stopped)."
    )
    assert signal.labels["alertname"] == "XidHardware"


def test_check_transitions_fire_and_resolve() -> None:
    details = {"check": "vram_unlocked", "previous": "ok", "remedy": "reload the unlock module"}
    bad = event(
        EventKind.CHECK,
        Severity.CRITICAL,
        "vram_unlocked ok -> critical: card 0: 8192 MiB (locked)",
        card=0,
        details=details,
    )
    (fired,) = event_signals(bad)
    assert (
        fired.fingerprint == "check:vram_unlocked:0" and fired.labels["alertname"] == "VramRelocked"
    )
    assert fired.summary == "VRAM relocked on card 0: card 0: 8192 MiB (locked)"
    assert fired.advice == "reload the unlock module"
    good = event(
        EventKind.CHECK,
        Severity.INFO,
        "vram_unlocked critical -> ok: fine",
        card=0,
        details=details,
    )
    (resolved,) = event_signals(good)
    assert not resolved.fire and resolved.fingerprint == "check:vram_unlocked:0"
    xid_check = event(EventKind.CHECK, Severity.CRITICAL, details={"check": "xid_since_boot"})
    assert event_signals(xid_check) == []  # the Xid event itself alerts


def serving(change: str, state: str, severity: Severity = Severity.WARNING) -> EventRow:
    return event(
        EventKind.SERVING, severity, f"{change} {state}", details={"kind": change, "state": state}
    )


def test_engine_crashed_held_stuck_and_back_to_ready() -> None:
    assert [s.fingerprint for s in event_signals(serving("crash", "backoff"))] == ["engine:crash"]
    (held,) = event_signals(serving("breaker", "held"))
    assert held.fingerprint == "engine:held" and held.severity is Severity.CRITICAL
    (stuck,) = event_signals(serving("stop_stuck", "stopping"))
    assert stuck.severity is Severity.CRITICAL and "Never kill -9" in stuck.advice
    ready = event_signals(serving("state", "ready", Severity.INFO))
    assert [(s.fingerprint, s.fire, s.prefix) for s in ready] == [
        ("engine:", False, True),
        ("xid:application:", False, True),
    ]
    assert event_signals(serving("launch", "starting")) == []


def test_reboots_resolve_xids_and_recovery_trouble_is_news() -> None:
    reboot = event(EventKind.REBOOT, Severity.INFO, "host rebooted (boot id a -> b)")
    assert ("xid:", False, True) in [
        (s.fingerprint, s.fire, s.prefix) for s in event_signals(reboot)
    ]
    failed = event(EventKind.RECOVERY, Severity.WARNING, "power cap not applied to card 2", card=2)
    (news,) = event_signals(failed)
    assert news.one_shot and news.fingerprint == "recovery:1"
    assert event_signals(event(EventKind.RECOVERY, Severity.INFO, "cap applied")) == []
    latched = {"action": "stop_and_latch", "dry_run": False}
    assert event_signals(event(EventKind.RECOVERY, Severity.CRITICAL, details=latched)) == []
    would = {"action": "stop_and_latch", "dry_run": True}
    (dry,) = event_signals(event(EventKind.RECOVERY, Severity.CRITICAL, details=would))
    assert dry.severity is Severity.CRITICAL and dry.one_shot


def test_latch_and_unclean_stop() -> None:
    latch = Latch(reason="Xid 79 on card 1", source="recovery", since=T0)
    fired = latch_signal(latch)
    assert fired.fire and fired.fingerprint == "reboot_required"
    assert (
        fired.severity is Severity.CRITICAL and fired.summary == "Reboot required: Xid 79 on card 1"
    )
    assert (
        fired.advice
        == "Reboot the host: fleetctl reboot --confirm (the engine is already stopped)."
    )
    cold = Latch("Xid 119 on card 2", "recovery", T0, Advice.COLD_POWER_CYCLE)
    assert latch_signal(cold).advice.startswith("Power the rig off for about 30 s")
    assert not latch_signal(None).fire
    unclean = unclean_stop_signal({"pid": 42, "since": "2026-09-29T02:00:00+00:00"}, T0)
    assert unclean.one_shot and "pid 42" in unclean.summary


def test_card_alerts_carry_the_metrics_labels() -> None:
    xid = event(
        EventKind.XID,
        Severity.CRITICAL,
        xid=31,
        card=2,
        card_uuid="GPU-7dcb8541-5105-5727-9999-63fd663217aa",
        card_serial="0533662889985",
        pci_bus_id="0000:41:00.0",
        details={"class": "hardware", "action": "reboot"},
    )
    (signal,) = event_signals(xid)
    assert signal.labels["gpu"] == 2  # as /metrics names it
    assert signal.labels["uuid"] == "GPU-7dcb8541-5105-5727-9999-63fd663217aa"
    assert signal.labels["pci_bus_id"] == "0000:41:00.0"
    assert signal.labels["card"] == 2  # kept for receivers of schema 1


@pytest.mark.parametrize("check", [*sorted(CHECK_TITLES), "some_new_check"])
def test_no_summary_stutters_on_the_card(check: str) -> None:
    message = f"{check} ok -> warning: card 0 (0000:01:00.0): something is off"
    bad = event(EventKind.CHECK, Severity.WARNING, message, card=0, details={"check": check})
    (fired,) = event_signals(bad)
    assert " on on " not in fired.summary
    assert fired.summary.endswith(" on card 0: something is off"), fired.summary


def test_an_unconfirmed_result_waits_for_the_confirmed_one() -> None:
    details = {"check": "power_brake", "previous": "ok", "remedy": "watch it", "confirmed": False}
    seen_once = event(
        EventKind.CHECK,
        Severity.WARNING,
        "power_brake ok -> warning: 1 of 3",
        card=0,
        details=details,
    )
    assert event_signals(seen_once) == []
    confirmed = event(
        EventKind.CHECK,
        Severity.CRITICAL,
        "power_brake warning -> critical: card 0 (0000:01:00.0): HW power brake in 3 of 3",
        card=0,
        details={"check": "power_brake", "previous": "warning", "remedy": "Kapton tape"},
    )
    (fired,) = event_signals(confirmed)
    assert fired.severity is Severity.CRITICAL
    assert fired.summary == "Power brake on card 0: HW power brake in 3 of 3"


def test_rules_judge_by_the_stored_fields_never_the_messages_words() -> None:
    """A message worded otherwise changes no verdict; the stored fields decide."""
    # The new boot is told from the latch clearing beside it by ``details.how``.
    boot = event(EventKind.REBOOT, Severity.INFO, "the machine came back up")
    assert ("xid:", False, True) in [(s.fingerprint, s.fire, s.prefix) for s in event_signals(boot)]
    cleared = event(
        EventKind.REBOOT, Severity.INFO, "host rebooted, latch cleared", details={"how": "reboot"}
    )
    assert event_signals(cleared) == []
    # An Xid's step follows XidInfo's one latch rule on its stored class and action, not the
    # event's severity: a reboot advised latches (the engine is stopped by then).
    reboot = event(
        EventKind.XID,
        Severity.WARNING,
        xid=79,
        card=0,
        details={"class": "hardware", "action": "reboot", "title": "fallen off the bus"},
    )
    (signal,) = event_signals(reboot)
    assert signal.advice.endswith("(the engine is already stopped).")
    # An unknown change or state is no alert (a newer fleetd's word, read by an older rule).
    assert event_signals(serving("rebalanced", "held")) == []
