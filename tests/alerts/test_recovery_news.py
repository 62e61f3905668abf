"""Which recovery events reach a phone: never what alerts on its own, never a person's own
request; a refused automatic start is one alert until the engine is ready; every summary
fits a lock screen and names the cause, the advice is its remedy (not "see events")."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from daemon.alerts.rules import event_signals, xid_signals
from daemon.alerts.words import LOCK_SCREEN_CHARS, lock_screen
from daemon.store.events import EventRow
from daemon.store.keyvalue import Latch
from hwcheck.model import Advice, EventKind, Severity

T0 = datetime(2026, 9, 29, 3, 0, tzinfo=UTC)
BRAKE = (
    "power_brake (card 0): card 0 (0000:01:00.0): HW power brake active with no thermal or "
    "power cause in 3 of 3 samples: 88 W, 1,140 MHz SM (healthy: about 1,400 MHz)"
)


def recovery(
    details: dict[str, Any], message: str = "start: autostart (done)", **fields: Any
) -> EventRow:
    return EventRow(
        id=7,
        ts=T0,
        kind=EventKind.RECOVERY,
        severity=Severity.WARNING,
        message=message,
        details=details,
        **fields,
    )


def started(actor: str, codes: list[str], first: str = BRAKE) -> EventRow:
    details = {
        "actor": actor,
        "action": "start",
        "result": f"done, with warnings: {first} " * 12,  # as long as the 2,015
        "warnings": [first] * 12,
        "codes": codes,
        "first": first,
    }
    return recovery(details, f"start: autostart ({details['result']})")


@pytest.mark.parametrize(
    "codes", [["critical_check"], ["warning_check", "foreign_gpu_processes"], ["gpus_held"]]
)
def test_a_start_with_warnings_that_alert_on_their_own_is_no_news(codes: list[str]) -> None:
    assert event_signals(started("fleetd", codes)) == []


def test_a_persons_start_with_warnings_is_answered_to_them() -> None:
    assert event_signals(started("api", ["port_in_use"])) == []


def test_an_automatic_start_with_a_warning_nothing_else_alerts_is_short_news() -> None:
    (news,) = event_signals(started("fleetd", ["preflight_warning"], first="the odd thing"))
    assert news.one_shot and news.labels["alertname"] == "Recovery"
    assert news.summary == "Engine started with warnings: the odd thing"
    assert "fleetctl events" not in news.advice


def refused(actor: str, codes: list[str], remedy: str = "") -> EventRow:
    details = {
        "actor": actor,
        "action": "refuse",
        "result": "not started",
        "codes": codes,
        "first": "recipe: [partition-sum] layer_partition = [12, 12, 12, 8]: sums to 44 layers",
        **({"remedy": remedy} if remedy else {}),
    }
    return recovery(details, "refuse: recipe: ... (not started)")


def test_a_persons_refused_request_is_not_alerted() -> None:
    assert event_signals(refused("api", ["lint"])) == []


def test_a_refused_automatic_start_is_one_alert_until_the_engine_is_ready() -> None:
    (alert,) = event_signals(refused("fleetd", ["lint"], "fix the recipe (fleetctl recipe lint)"))
    assert (alert.fingerprint, alert.one_shot) == ("engine:start_refused", False)
    assert alert.labels["alertname"] == "EngineStartRefused"
    assert alert.summary.startswith("Engine not started: recipe: [partition-sum]")
    assert alert.advice == "Fix the recipe (fleetctl recipe lint)."
    # A fleetd restart refused again fires the same fingerprint: the store folds it.
    assert event_signals(refused("fleetd", ["lint"]))[0].fingerprint == alert.fingerprint
    ready = EventRow(
        id=8,
        ts=T0,
        kind=EventKind.SERVING,
        severity=Severity.INFO,
        message="engine ready",
        details={"kind": "state", "state": "ready"},
    )
    assert ("engine:", False, True) in [
        (s.fingerprint, s.fire, s.prefix) for s in event_signals(ready)
    ]


@pytest.mark.parametrize("codes", [["reboot_latch"], ["critical_check", "reboot_latch"]])
def test_a_refusal_whose_reasons_alert_on_their_own_is_no_news(codes: list[str]) -> None:
    assert event_signals(refused("fleetd", codes)) == []


def test_a_cap_that_could_not_be_set_names_its_cause_and_its_remedy() -> None:
    failed = recovery(
        {"action": "apply_power_cap", "actor": "fleetd"},
        "cannot apply the 180 W cap to card 2 (0000:41:00.0): Insufficient Permissions",
        card=2,
    )
    (news,) = event_signals(failed)
    assert news.summary.startswith("Recovery on card 2: cannot apply the 180 W cap")
    assert news.advice.startswith("Run fleetd as root")


def test_every_summary_fits_a_lock_screen() -> None:
    long = "word " * 500
    cut = lock_screen(long)
    assert len(cut) <= LOCK_SCREEN_CHARS and cut.endswith(" ...")
    assert lock_screen("short\n  text") == "short text"
    (news,) = event_signals(started("fleetd", ["preflight_warning"], first=long))
    assert len(news.summary) <= LOCK_SCREEN_CHARS


def test_a_latching_xid_advises_what_the_latch_asks() -> None:
    xid = EventRow(
        id=3,
        ts=T0,
        kind=EventKind.XID,
        severity=Severity.CRITICAL,
        message="Xid 31",
        xid=31,
        card=1,
        pci_bus_id="0000:21:00.0",
        details={"class": "hardware", "action": "reboot", "title": "MMU page fault"},
    )
    (warm,) = xid_signals(xid)
    assert warm.advice.startswith("Reboot the host")
    cold = Latch("Xid 31 on card 1, again", "recovery", T0, Advice.COLD_POWER_CYCLE)
    (escalated,) = xid_signals(xid, cold)
    assert escalated.advice.startswith("Power the rig off for about 30 s")
