"""Alert state in the store (SQLite and PostgreSQL): folding, windows, repeats, routing, cursor."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from daemon.store import Store
from daemon.store.alerts import AlertPolicy, AlertSignal, SinkRoute
from hwcheck.model import Severity

T0 = datetime(2026, 9, 29, 3, 0, tzinfo=UTC)
ROUTES = [SinkRoute("all", Severity.INFO), SinkRoute("crit", Severity.CRITICAL)]


def fire(fp: str, severity: Severity = Severity.WARNING, **kw: object) -> AlertSignal:
    return AlertSignal(fp, fire=True, rule="t", severity=severity, summary=f"{fp} is bad", **kw)  # type: ignore[arg-type]


def resolve(fp: str) -> AlertSignal:
    return AlertSignal(fp, fire=False)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def queued(store: Store) -> list[tuple[str, str, str, bool]]:
    """(fingerprint, sink, status, repeat) of every notification, oldest first."""
    alerts = {a.id: a.fingerprint for a in store.list_alerts(1000)}
    notes = store.notifications_of(list(alerts))
    return [(alerts[n.alert_id], n.sink, n.status, n.repeat) for n in notes]


def test_duplicates_fold_and_only_a_worse_severity_is_news(store: Store) -> None:
    policy = AlertPolicy(group_window_s=0)
    store.apply_alert_signals([fire("a")], ROUTES, policy, now=at(0))
    store.apply_alert_signals([fire("a"), fire("a")], ROUTES, policy, now=at(1))
    assert queued(store) == [("a", "all", "firing", False)]
    store.apply_alert_signals([fire("a", Severity.CRITICAL)], ROUTES, policy, now=at(2))
    assert queued(store)[1:] == [("a", "all", "firing", False), ("a", "crit", "firing", False)]
    (alert,) = store.list_alerts()
    assert alert.count == 4 and alert.severity is Severity.CRITICAL


def test_a_resolve_waits_the_window_and_flapping_stays_one_alert(store: Store) -> None:
    policy = AlertPolicy(group_window_s=60)
    store.apply_alert_signals([fire("t")], ROUTES, policy, now=at(0))
    store.apply_alert_signals([resolve("t")], ROUTES, policy, now=at(1))
    store.apply_alert_signals([fire("t")], ROUTES, policy, now=at(2))  # back within the window
    store.apply_alert_signals([resolve("t")], ROUTES, policy, now=at(3))
    store.apply_alert_signals([], ROUTES, policy, now=at(62))
    assert queued(store) == [("t", "all", "firing", False)]
    assert store.next_alert_due_at(policy) == at(63)
    store.apply_alert_signals([], ROUTES, policy, now=at(63))
    assert queued(store) == [("t", "all", "firing", False), ("t", "all", "resolved", False)]
    (alert,) = store.list_alerts()
    assert alert.status == "resolved" and alert.count == 2 and alert.resolved_at == at(63)


def test_a_first_firing_is_never_held_by_the_window(store: Store) -> None:
    policy = AlertPolicy(group_window_s=3600)
    assert store.apply_alert_signals([fire("new")], ROUTES, policy, now=at(0)) == 1


def test_critical_alerts_repeat_and_alertmanager_api_hears_every_one(store: Store) -> None:
    routes = [*ROUTES, SinkRoute("am", Severity.WARNING, repeat_all=True)]
    policy = AlertPolicy(group_window_s=0, repeat_interval_s=100)
    store.apply_alert_signals([fire("c", Severity.CRITICAL), fire("w")], routes, policy, now=at(0))
    first = len(queued(store))
    store.apply_alert_signals([], routes, policy, now=at(99))
    assert len(queued(store)) == first
    store.apply_alert_signals([], routes, policy, now=at(100))
    repeats = sorted((fp, sink) for fp, sink, _, rep in queued(store) if rep)
    assert repeats == [("c", "all"), ("c", "am"), ("c", "crit"), ("w", "am")]


def test_resolves_go_only_to_the_sinks_told_it_fired(store: Store) -> None:
    policy = AlertPolicy(group_window_s=0)
    store.apply_alert_signals([fire("w")], ROUTES, policy, now=at(0))
    store.apply_alert_signals([resolve("w")], ROUTES, policy, now=at(1))
    assert queued(store) == [("w", "all", "firing", False), ("w", "all", "resolved", False)]


def test_prefix_resolves_and_one_shots(store: Store) -> None:
    policy = AlertPolicy(group_window_s=0)
    signals = [fire("xid:hardware:1"), fire("xid:application:2"), fire("other")]
    store.apply_alert_signals(signals, ROUTES, policy, now=at(0))
    store.apply_alert_signals([AlertSignal("xid:", False, prefix=True)], ROUTES, policy, now=at(1))
    assert {a.fingerprint for a in store.list_alerts(status="firing")} == {"other"}
    store.apply_alert_signals([fire("news", one_shot=True)], ROUTES, policy, now=at(2))
    store.apply_alert_signals([fire("news", one_shot=True)], ROUTES, policy, now=at(3))
    news = [a for a in store.list_alerts() if a.fingerprint == "news"]
    assert len(news) == 2 and all(a.status == "resolved" for a in news)


def test_the_cursor_moves_with_the_alerts(store: Store) -> None:
    assert store.alert_cursor() is None
    store.apply_alert_signals([fire("a")], ROUTES, AlertPolicy(), cursor=42, now=at(0))
    assert store.alert_cursor() == 42


def brake(card: int, severity: Severity = Severity.CRITICAL) -> AlertSignal:
    return AlertSignal(
        f"check:power_brake:{card}",
        fire=True,
        rule="check",
        severity=severity,
        summary=f"Power brake on card {card}: HW power brake active, {88 + card} W",
        labels={"alertname": "PowerBrake", "gpu": card, "card": card},
    )


def test_a_board_level_fault_is_one_notification_per_sink_naming_the_cards(store: Store) -> None:
    policy = AlertPolicy(group_window_s=60)
    count = store.apply_alert_signals([brake(c) for c in range(4)], ROUTES, policy, now=at(0))
    assert count == 2  # one per sink, queued in this pass: nothing waits for the group
    notes = store.notifications_of([a.id for a in store.list_alerts(100)])
    assert sorted(n.sink for n in notes) == ["all", "crit"]
    payload = notes[0].payload
    assert payload["summary"] == "Power brake on cards 0-3: HW power brake active, 88 W"
    assert payload["cards"] == [0, 1, 2, 3]
    assert [m["labels"]["gpu"] for m in payload["members"]] == [0, 1, 2, 3]
    assert len(store.list_alerts(100)) == 4  # still one alert per card: each resolves alone
    assert store.next_notification("all") is not None  # sendable at once

    # A card joining later is news of its own; the four resolving together are one again.
    store.apply_alert_signals([brake(4)], ROUTES, policy, now=at(5))
    store.apply_alert_signals(
        [resolve(f"check:power_brake:{c}") for c in range(5)], ROUTES, policy, now=at(6)
    )
    store.apply_alert_signals([], ROUTES, policy, now=at(66))
    kinds = [
        (n.sink, n.status, len(n.payload.get("members") or [n.payload]))
        for n in store.notifications_of([a.id for a in store.list_alerts(100)])
    ]
    assert sorted(kinds) == sorted([
        ("all", "firing", 4), ("crit", "firing", 4),
        ("all", "firing", 1), ("crit", "firing", 1),
        ("all", "resolved", 5), ("crit", "resolved", 5),
    ])  # fmt: skip


def test_alerts_of_different_names_or_severities_are_not_grouped(store: Store) -> None:
    policy = AlertPolicy(group_window_s=60)
    hot = AlertSignal("check:temperature:2", fire=True, rule="check", summary="Too hot on card 2",
                      labels={"alertname": "Thermal", "gpu": 2, "card": 2})  # fmt: skip
    rig_wide = fire("check:kernel_log:rig")
    signals = [brake(0), brake(1, Severity.WARNING), hot, rig_wide]
    assert (
        store.apply_alert_signals(signals, [SinkRoute("all", Severity.INFO)], policy, now=at(0))
        == 4
    )
