"""One notification per cause (store side, times given by the test): a symptom whose cause
fires is folded into the cause's notifications as "also affected"; it is sent on its own
once it outlives its cause; a changed advice is news; an amend changes advice quietly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from daemon.alerts.inhibit import INHIBITS
from daemon.store import Store
from daemon.store.alerts import AlertPolicy, AlertSignal, SinkRoute
from hwcheck.model import Severity

T0 = datetime(2026, 9, 29, 3, 0, tzinfo=UTC)
ROUTES = [SinkRoute("phone", Severity.WARNING)]
POLICY = AlertPolicy(group_window_s=60, repeat_interval_s=3600, inhibits=INHIBITS)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def brake(card: int) -> AlertSignal:
    return AlertSignal(
        f"check:power_brake:{card}",
        fire=True,
        rule="check",
        severity=Severity.CRITICAL,
        summary=f"Power brake on card {card}: HW power brake active",
        advice="Every card is braked at once: the board or the power supply.",
        labels={"alertname": "PowerBrake", "gpu": card, "card": card},
    )


SLOW = AlertSignal(
    "canary:throughput",
    fire=True,
    rule="canary",
    severity=Severity.WARNING,
    summary="Engine canary throughput: warn (was pass): 7.4 tok/s, 25% of 30",
    advice="The power brake is the likely cause.",
    labels={"alertname": "CanaryThroughput", "canary": "throughput"},
)


def sent(store: Store) -> list[tuple[str, str, bool, list[str]]]:
    """(alertname, status, repeat, also_affected) of every notification, oldest first."""
    alerts = store.list_alerts(1000)
    notes = store.notifications_of([a.id for a in alerts])
    return [
        (
            str(n.payload["labels"].get("alertname")),
            n.status,
            n.repeat,
            list(n.payload.get("also_affected") or []),
        )
        for n in notes
    ]


def test_a_slow_canary_under_the_brake_is_folded_then_released_when_the_brake_ends(
    store: Store,
) -> None:
    store.apply_alert_signals([brake(c) for c in range(4)], ROUTES, POLICY, now=at(0))
    assert store.apply_alert_signals([SLOW], ROUTES, POLICY, now=at(20)) == 0
    assert sent(store) == [("PowerBrake", "firing", False, [])]
    (canary,) = [a for a in store.list_alerts(100) if a.fingerprint == "canary:throughput"]
    assert canary.status == "firing" and canary.notified_at is None  # kept, not sent

    # The brake's repeat lists it.
    store.apply_alert_signals([], ROUTES, POLICY, now=at(3600))
    repeat = sent(store)[-1]
    assert repeat[:3] == ("PowerBrake", "firing", True)
    assert repeat[3] == [SLOW.summary]

    # The brake ends (the window passes); the canary still reads slow: news of its own now.
    ended = [AlertSignal(f"check:power_brake:{c}", fire=False) for c in range(4)]
    store.apply_alert_signals(ended, ROUTES, POLICY, now=at(3700))
    store.apply_alert_signals([], ROUTES, POLICY, now=at(3760))
    assert sent(store)[-2:] == [
        ("PowerBrake", "resolved", False, []),
        ("CanaryThroughput", "firing", False, []),
    ]


def test_a_symptom_in_the_same_pass_is_listed_on_the_causes_notification(store: Store) -> None:
    store.apply_alert_signals([brake(0), SLOW], ROUTES, POLICY, now=at(0))
    assert sent(store) == [("PowerBrake", "firing", False, [SLOW.summary])]


def test_a_cards_cause_covers_only_that_cards_symptoms(store: Store) -> None:
    policy = AlertPolicy(group_window_s=0, inhibits={"CardLost": frozenset({"Thermal"})})
    lost = AlertSignal(
        "check:card_lost:1",
        fire=True,
        severity=Severity.CRITICAL,
        summary="Card lost on card 1",
        labels={"alertname": "CardLost", "card": 1},
    )

    def hot(card: int) -> AlertSignal:
        return AlertSignal(
            f"check:temperature:{card}",
            fire=True,
            summary=f"Too hot on card {card}",
            labels={"alertname": "Thermal", "card": card},
        )

    store.apply_alert_signals([lost], ROUTES, policy, now=at(0))
    store.apply_alert_signals([hot(1), hot(2)], ROUTES, policy, now=at(1))
    assert [name for name, *_ in sent(store)] == ["CardLost", "Thermal"]
    (sent_hot,) = [
        a for a in store.list_alerts(100) if a.notified_at is not None and a.summary != lost.summary
    ]
    assert sent_hot.summary == "Too hot on card 2"


def test_a_changed_advice_is_news_and_the_stored_advice_follows(store: Store) -> None:
    def latch(advice: str) -> AlertSignal:
        return AlertSignal(
            "reboot_required",
            fire=True,
            severity=Severity.CRITICAL,
            summary="Reboot required: Xid 31 on card 1",
            advice=advice,
            labels={"alertname": "RebootRequired"},
        )

    store.apply_alert_signals([latch("Reboot the host.")], ROUTES, POLICY, now=at(0))
    store.apply_alert_signals([latch("Reboot the host.")], ROUTES, POLICY, now=at(5))
    assert len(sent(store)) == 1  # the same advice again: folded
    store.apply_alert_signals([latch("Power the rig off for 30 s.")], ROUTES, POLICY, now=at(9))
    notes = store.notifications_of([a.id for a in store.list_alerts(10)])
    assert [n.payload["advice"] for n in notes] == [
        "Reboot the host.",
        "Power the rig off for 30 s.",
    ]
    (alert,) = store.list_alerts(10)
    assert alert.advice == "Power the rig off for 30 s."


def test_an_amend_changes_the_advice_of_open_alerts_quietly(store: Store) -> None:
    xid = AlertSignal(
        "xid:hardware:0000:21:00.0",
        fire=True,
        severity=Severity.CRITICAL,
        summary="Xid 31 (MMU page fault) on card 1",
        advice="Reboot the host.",
        labels={"alertname": "XidHardware", "card": 1},
    )
    store.apply_alert_signals([xid], ROUTES, POLICY, now=at(0))
    amend = AlertSignal(
        "xid:",
        fire=True,
        prefix=True,
        amend=True,
        severity=Severity.CRITICAL,
        advice="Power the rig off for 30 s.",
    )
    assert store.apply_alert_signals([amend], ROUTES, POLICY, now=at(1)) == 0
    (alert,) = store.list_alerts(10)
    assert alert.advice == "Power the rig off for 30 s." and alert.count == 1
    assert len(sent(store)) == 1
