"""A board-level fault on a real fleetd: one power brake on every card is one message.

The ``power-brake`` scenario brakes all four cards from boot (the board asserts PWRBRK#
on every slot). The brake check needs three samples in a row to call it, so the first
sample's unconfirmed warning is shown but not alerted; the confirmed critical of the
four cards is one notification per webhook naming them, sent in the pass that derived
it. The engine starts with the brake as a warning and its first canary round reads a
quarter speed: neither is news of its own (the start's warning alerts by itself, the slow
canary is a symptom of the brake, folded into it): at most 2 notifications per webhook.
A third webhook points at a port nobody listens on: ``fleetctl alerts test`` reports
its error at once instead of waiting out its timeout.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, free_port, start_fleetd, stop_all, wait_until
from tests.support.webhook import WebhookReceiver

pytestmark = pytest.mark.slow(seconds=15)
SETTLE_POLLS = 8  # polls after the first notification while nothing more may be sent


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def braked(tmp_path_factory: pytest.TempPathFactory, receiver: WebhookReceiver) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("board-fault")
    config = tmp / "fleet.toml"
    config.write_text(
        '[rig]\nname = "braked-rig"\n'
        "[poll]\ninterval_s = 0.5\n"
        # The first canary round right after ready, small: the brake's symptom comes fast.
        "[canary]\nbusy_running_requests = 0\nidentifiers = 20\n"
        "throughput_prompt_tokens = 200\nthroughput_max_tokens = 16\n"
        "[alerts]\nretry_min_s = 0.05\nretry_max_s = 0.2\n"
        f'[[alerts.webhooks]]\nurl = "{receiver.url}/json"\nformat = "json"\nmin_severity = "info"\n'
        f'[[alerts.webhooks]]\nurl = "{receiver.url}/am"\nformat = "alertmanager"\n'
        f'[[alerts.webhooks]]\nname = "dead"\nurl = "http://127.0.0.1:{free_port()}/gone"\n'
    )
    daemon = start_fleetd(tmp, tmp / "state", simulate="power-brake", config=config)
    yield daemon
    stop_all([daemon])


def drained(daemon: Fleetd) -> None:
    """Wait until the live webhooks have nothing pending."""
    wait_until(
        lambda: all(
            s["pending"] == 0
            for s in daemon.get("/api/v1/alerts").json()["sinks"]
            if s["name"] != "dead"
        ),
        10,
        "the live webhooks drained",
    )


def sent_names(receiver: WebhookReceiver, path: str) -> list[str]:
    """The alert names delivered at ``path``, in order."""
    sent = [r.json() for r in receiver.requests if r.path == path]
    return [str(d.get("name") or d["groupLabels"]["alertname"]) for d in sent]


def polls(daemon: Fleetd) -> int:
    return int(daemon.get("/api/v1/status").json()["rig"]["polls"])


def test_four_braked_cards_are_one_critical_per_webhook(
    braked: Fleetd, receiver: WebhookReceiver
) -> None:
    got = receiver.wait_for(
        lambda rs: any(r.path == "/json" and r.json()["name"] == "PowerBrake" for r in rs),
        30,
        "the power brake alert",
    )
    brake = next(r.json() for r in got if r.path == "/json" and r.json()["name"] == "PowerBrake")
    assert brake["severity"] == "critical"  # the unconfirmed warning before it was not sent
    assert brake["summary"].startswith("Power brake on cards 0-3: HW power brake")
    assert brake["cards"] == [0, 1, 2, 3]
    assert brake["rig"] == "braked-rig"  # [rig] name, not the host name
    am = next(r.json() for r in got if r.path == "/am")
    assert {alert["labels"]["instance"] for alert in am["alerts"]} == {"braked-rig"}
    members = brake["members"]
    assert [m["labels"]["gpu"] for m in members] == [0, 1, 2, 3]
    assert all(
        m["labels"]["uuid"].startswith("GPU-") and m["labels"]["pci_bus_id"] for m in members
    )

    after = polls(braked)
    wait_until(lambda: polls(braked) >= after + SETTLE_POLLS, 30, "the rig polled on")
    drained(braked)
    for path in ("/json", "/am"):
        names = sent_names(receiver, path)
        assert len(names) <= 2, (path, names)  # the brake (the start's warning is the brake)
    am = next(r.json() for r in receiver.requests if r.path == "/am")
    assert [a["labels"]["gpu"] for a in am["alerts"]] == ["0", "1", "2", "3"]
    assert am["commonLabels"]["alertname"] == "PowerBrake"


def test_the_slow_canary_folds_into_the_brake_and_nothing_else_is_sent(
    braked: Fleetd, receiver: WebhookReceiver
) -> None:
    """The issue's three notifications (brake, start "with warnings", canary) are one."""

    def canary_alert() -> dict[str, Any] | None:
        alerts = braked.get("/api/v1/alerts").json()["alerts"]
        return next((a for a in alerts if a["labels"].get("alertname") == "CanaryThroughput"), None)

    wait_until(lambda: canary_alert() is not None, 90, "the throughput canary's alert")
    drained(braked)
    folded = canary_alert()
    assert folded is not None and folded["status"] == "firing"
    assert folded["deliveries"] == []  # told with the brake, never on its own
    for path in ("/json", "/am"):
        names = sent_names(receiver, path)
        assert len(names) <= 2, (path, names)
        assert "CanaryThroughput" not in names and "Recovery" not in names, names


def test_fleetctl_alerts_shows_the_cards_sent_together(braked: Fleetd) -> None:
    listed = json.loads(run_fleetctl_here("--url", braked.url, "alerts", "--json").stdout)
    brakes = [a for a in listed["alerts"] if a["labels"].get("alertname") == "PowerBrake"]
    assert len(brakes) == 4  # one alert per card, each resolves on its own
    leader = min(a["id"] for a in brakes)
    followers = [a for a in brakes if a["id"] != leader]
    assert all(a["sent_with"] == leader and a["deliveries"] for a in followers)


def test_alerts_test_reports_a_dead_webhook_at_once(braked: Fleetd) -> None:
    started = time.monotonic()
    shown = run_fleetctl_here(
        "--url", braked.url, "alerts", "test", "--timeout", "60",
        env={"FLEETCTL_TOKEN": braked.token},
    )  # fmt: skip
    took_s = time.monotonic() - started
    assert shown.returncode == 1, shown.stderr
    lines: dict[str, Any] = dict(line.split(": ", 1) for line in shown.stdout.splitlines())
    assert lines["json"] == "delivered" and lines["alertmanager"] == "delivered"
    assert lines["dead"].startswith("failed: ConnectError"), lines["dead"]
    assert "connection refused" in lines["dead"].lower() or "Errno 111" in lines["dead"]
    assert took_s < 30  # it did not wait out --timeout 60 for the dead one
