"""A real Prometheus scrapes two simulated rigs and the shipped rules alert on the right one.

The rigs are ``tests/fleet/conftest.py``'s: one healthy, one whose simulated kernel log got
a real-format Xid 31 line on card 1. Prometheus (Debian's, on loopback) evaluates the
shipped ``cmpfleet.rules.yml`` every second; the Xid alert must fire for that rig, naming
the card and the Xid, the reboot latch the Xid set must page, and nothing may fire for the
healthy one. Prometheus sends its alerts
to a real Alertmanager running the shipped routing (``deploy/alertmanager``), its two
webhook receivers pointed at a loopback recorder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.deploy import (
    ALERTMANAGER,
    RULES,
    as_instant_query,
    dashboard,
    dashboard_queries,
)
from tests.support.fleet_rigs import XID_CARD, TwoRigs
from tests.support.fleetd import Fleetd, wait_until
from tests.support.prometheus import Prometheus, Server, start_alertmanager, start_prometheus
from tests.support.webhook import Received, WebhookReceiver
from web.version import __version__

pytestmark = [pytest.mark.external, pytest.mark.slow(seconds=20)]


def target(daemon: Fleetd) -> str:
    return daemon.url.removeprefix("http://")


@pytest.fixture(scope="module")
def notifications() -> Iterator[WebhookReceiver]:
    """Alertmanager's two webhook receivers: every notification, by path."""
    receiver = WebhookReceiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="module")
def alertmanager(
    notifications: WebhookReceiver, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """The shipped routing, its receivers' URLs pointed at the recorder (nothing else changed)."""
    shipped = ALERTMANAGER.read_text()
    config = shipped.replace(
        "http://pager.example.lan/hooks/cmpfleet", notifications.url + "/pager"
    )
    config = config.replace(
        "http://chat-bridge.example.lan/hooks/cmpfleet", notifications.url + "/team"
    )
    assert config.count(notifications.url) == 2
    server = start_alertmanager(tmp_path_factory.mktemp("alertmanager"), config)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def prometheus(
    two_rigs: TwoRigs, alertmanager: Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    """The shipped rules over both rigs, labelled ``rig`` as deploy/prometheus/rigs.yml does."""
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "alerting": {
            "alertmanagers": [
                {"static_configs": [{"targets": [alertmanager.url.removeprefix("http://")]}]}
            ]
        },
        "scrape_configs": [
            {
                "job_name": "cmpfleet",
                "static_configs": [
                    {"targets": [target(two_rigs.healthy)], "labels": {"rig": "healthy"}},
                    {"targets": [target(two_rigs.xid)], "labels": {"rig": "xid"}},
                ],
            }
        ],
    }
    server = start_prometheus(tmp_path_factory.mktemp("prometheus"), config)
    yield server
    server.stop()


def firing(server: Prometheus) -> list[dict[str, Any]]:
    return [alert for alert in server.alerts() if alert["state"] == "firing"]


def test_both_rigs_are_scraped_with_every_card(prometheus: Prometheus) -> None:
    def four_cards_each() -> bool:
        rows = prometheus.query("count by (rig) (cmpfleet_gpu_power_watts)")
        return {row["metric"]["rig"]: row["value"][1] for row in rows} == {
            "healthy": "4",
            "xid": "4",
        }

    wait_until(four_cards_each, 20, "both rigs' four cards in Prometheus", interval_s=0.5)
    up = {row["metric"]["rig"]: row["value"][1] for row in prometheus.query('up{job="cmpfleet"}')}
    assert up == {"healthy": "1", "xid": "1"}
    builds = prometheus.query("cmpfleet_build_info")  # which version runs where
    assert {(r["metric"]["rig"], r["metric"]["version"], r["value"][1]) for r in builds} == {
        ("healthy", __version__, "1"),
        ("xid", __version__, "1"),
    }
    assert all(r["metric"]["python"] for r in builds)


def test_the_xid_alert_fires_for_the_rig_with_the_xid_and_only_there(
    prometheus: Prometheus, two_rigs: TwoRigs
) -> None:
    def xid_alert() -> dict[str, Any] | None:
        return next(
            (a for a in firing(prometheus) if a["labels"]["alertname"] == "CmpfleetGpuXid"), None
        )

    wait_until(lambda: xid_alert() is not None, 30, "CmpfleetGpuXid to fire", interval_s=0.5)
    alert = xid_alert()
    assert alert is not None
    labels = alert["labels"]
    assert (labels["rig"], labels["gpu"], labels["xid"]) == ("xid", str(XID_CARD), "31")
    assert labels["instance"] == target(two_rigs.xid)
    assert labels["severity"] == "warning"
    assert alert["annotations"]["summary"] == f"Rig xid: Xid 31 on card {XID_CARD}"

    # A hardware-class Xid sets the rig's reboot latch; Prometheus sees it as a page.
    assert two_rigs.xid.get("/api/v1/status").json()["recovery"]["reboot_required"] is True

    def latch_alert() -> bool:
        return any(
            a["labels"]["alertname"] == "CmpfleetRebootRequired" and a["labels"]["rig"] == "xid"
            for a in firing(prometheus)
        )

    wait_until(latch_alert, 10, "CmpfleetRebootRequired for the rig with the Xid")

    healthy = [a["labels"] for a in prometheus.alerts() if a["labels"].get("rig") == "healthy"]
    assert healthy == []


# Card metrics a CMP 170HX (and so the simulated rig) leaves out: NVML answers NotSupported.
NOT_ON_A_CMP = (
    "cmpfleet_gpu_remapped_rows_correctable",
    "cmpfleet_gpu_remapped_rows_uncorrectable",
    "cmpfleet_gpu_row_remap_pending",
    "cmpfleet_gpu_row_remap_failed",
)


def test_every_dashboard_query_runs_in_prometheus(prometheus: Prometheus) -> None:
    """Each panel's PromQL parses in a real Prometheus, and the card panels find the cards."""
    # Two scrapes of each rig, not one: the rate and increase panels need two samples a series.
    wait_until(
        lambda: len(prometheus.query("increase(cmpfleet_gpu_energy_joules_total[1h])")) == 8,
        20,
        "two scrapes of both rigs' cards in Prometheus",
        interval_s=0.5,
    )
    document = dashboard()
    for query in dashboard_queries(document):
        if query.startswith("label_values("):
            continue  # a Grafana function, not PromQL
        prometheus.query(as_instant_query(query))  # raises on a PromQL error
    repeated_at = next(i for i, p in enumerate(document["panels"]) if p.get("repeat") == "rig")
    for panel in document["panels"][repeated_at + 1 :]:  # the per-rig panels
        for target in panel.get("targets", []):
            expr = target["expr"]
            if "cmpfleet_gpu_" in expr and "xid" not in expr:
                rows = prometheus.query(as_instant_query(expr))
                # A CMP 170HX reports no row remapping (no ECC): its panel stays empty here.
                expected = 0 if any(name in expr for name in NOT_ON_A_CMP) else 8
                assert len(rows) == expected, (panel["title"], expr, rows)


def test_alertmanager_routes_the_rig_alerts_by_severity(
    prometheus: Prometheus, notifications: WebhookReceiver, two_rigs: TwoRigs
) -> None:
    """The latch pages, the Xid warning reaches the team; grouped per alert and rig."""

    def got(path: str, alertname: str) -> Callable[[list[Received]], bool]:
        group = {"alertname": alertname, "rig": "xid"}
        return lambda requests: any(
            r.path == path and r.json()["groupLabels"] == group for r in requests
        )

    notifications.wait_for(got("/team", "CmpfleetGpuXid"), 40, "the Xid at the team receiver")
    received = notifications.wait_for(
        got("/pager", "CmpfleetRebootRequired"), 40, "the latch at the pager"
    )
    for request in received:
        path = request.path
        for alert in request.json()["alerts"]:
            assert alert["labels"]["rig"] == "xid", alert  # nothing about the healthy rig
            want = "/pager" if alert["labels"]["severity"] == "critical" else "/team"
            assert path == want, (path, alert["labels"])
