"""Every firing alert shows in the verdict at its severity (status, dashboard, exit code).

On ``spec-collapse`` a ``SpecAcceptanceCollapsed`` warning was paged while ``fleetctl
status`` said OK (exit 0): the verdict read only the checks and the latch. The alert
engine now tells the verdict what fires (no check's own alert, no one-shot news), and
``judge`` shows the worst at its severity, naming it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from daemon.alerts.engine import AlertEngine
from daemon.store import Latch, Store
from daemon.store.alerts import AlertPolicy, AlertSignal, SinkRoute
from hwcheck.model import Advice, CheckResult, Severity
from hwcheck.verdict import FiringAlert, judge

OK = [CheckResult("power_cap", 0, Severity.OK, "card 0: 180 W")]
SPEC = FiringAlert(
    "SpecAcceptanceCollapsed", Severity.WARNING, "Speculative decoding acceptance collapsed"
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    yield opened
    opened.close()


def test_a_firing_warning_makes_an_ok_rig_a_warning_naming_the_alert() -> None:
    assert judge(OK).overall == "ok"
    verdict = judge(OK, alerts=[SPEC])
    assert verdict.overall == "warning" and verdict.rank == 1
    assert verdict.why == f"alert SpecAcceptanceCollapsed: {SPEC.summary}"


def test_an_alert_never_lowers_the_verdict_nor_hides_an_unknown_one() -> None:
    critical = [CheckResult("xid_since_boot", 0, Severity.CRITICAL, "card 0: Xid 79")]
    assert judge(critical, alerts=[SPEC]).overall == "critical"
    assert judge(OK, latch_reason="Xid 79", alerts=[SPEC]).why.startswith("reboot required")
    page = FiringAlert("GuardDown", Severity.CRITICAL, "the traffic guard is down")
    assert judge(OK, engine_state="backoff", alerts=[page]).overall == "critical"
    info = FiringAlert("News", Severity.INFO, "a daemon start")
    assert judge(OK, alerts=[info]).overall == "ok"


def test_the_engine_tells_the_verdict_what_fires_and_when_it_resolves(store: Store) -> None:
    engine = AlertEngine(store, [], AlertPolicy(0.0, 3600.0), lambda: None, lambda: None)
    told: list[list[FiringAlert]] = []
    engine.add_firing_listener(told.append)
    engine.step()
    assert told == [[]]
    engine.add(
        AlertSignal(
            "engine_metric:spec_acceptance",
            fire=True,
            rule="engine_metric",
            severity=Severity.WARNING,
            summary=SPEC.summary,
            labels={"alertname": "SpecAcceptanceCollapsed"},
        )
    )
    # A check's own alert is the verdict's input already; one-shot news is no state.
    engine.add(
        AlertSignal(
            "check:power_cap:card0",
            fire=True,
            rule="check",
            severity=Severity.CRITICAL,
            summary="power cap",
            labels={"alertname": "PowerCapDrift"},
        )
    )
    engine.add(
        AlertSignal(
            "recovery:1",
            fire=True,
            rule="recovery",
            severity=Severity.CRITICAL,
            summary="news",
            labels={"alertname": "Recovery"},
            one_shot=True,
        )
    )
    engine.step()
    assert told[-1] == [SPEC]
    calls = len(told)
    engine.step()  # nothing new: nothing read, nothing told
    assert len(told) == calls
    engine.add(AlertSignal("engine_metric:spec_acceptance", fire=False))
    engine.step()
    assert told[-1] == []


def test_the_next_rung_after_a_cold_power_cycle_is_news_naming_the_card(store: Store) -> None:
    in_force: list[Latch | None] = [None]
    sink = SinkRoute("phone", Severity.WARNING)
    engine = AlertEngine(
        store, [sink], AlertPolicy(60.0, 3600.0), lambda: None, lambda: in_force[0]
    )
    t0 = datetime.now(UTC)
    engine.step(t0)
    in_force[0] = Latch("Xid 31 on card 1", "recovery", t0, Advice.COLD_POWER_CYCLE, 1)
    engine.step(t0 + timedelta(seconds=1))
    in_force[0] = None  # the cold power cycle clears it
    engine.step(t0 + timedelta(seconds=30))
    again = "Xid 31 on card 1; card 1 faulted again after 1 warm reboot and 1 cold power cycle"
    in_force[0] = Latch(again, "recovery", t0, Advice.TAKE_CARD_OUT, 1)
    engine.step(t0 + timedelta(seconds=40))
    engine.step(t0 + timedelta(seconds=50))  # the same latch: nothing more
    (alert,) = store.list_alerts(10, None)
    notes = store.notifications_of([alert.id])
    assert [n.payload["advice"][:16] for n in notes] == ["Power the rig of", "Take card 1 out:"]
    assert "after 1 warm reboot and 1 cold power cycle" in notes[-1].payload["summary"]


def test_an_alert_waiting_out_its_group_window_no_longer_counts(store: Store) -> None:
    engine = AlertEngine(store, [], AlertPolicy(60.0, 3600.0), lambda: None, lambda: None)
    told: list[list[FiringAlert]] = []
    engine.add_firing_listener(told.append)
    engine.add(
        AlertSignal(
            "canary:throughput",
            fire=True,
            rule="canary",
            severity=Severity.WARNING,
            summary="throughput",
            labels={"alertname": "CanaryThroughput"},
        )
    )
    engine.step()
    assert [a.name for a in told[-1]] == ["CanaryThroughput"]
    engine.add(AlertSignal("canary:throughput", fire=False))
    engine.step()
    assert store.list_alerts(10, "firing"), "still open for its group window"
    assert told[-1] == []  # but its cause is gone: the verdict is OK again now
