"""A real fleetd with webhooks of every format: Xids and checks become alerts on the wire.

One fleetd and one receiver for the module (each format on its own path); the
``kill -9`` test runs its own fleetd, since killing is the point.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon.alerts.signing import verify
from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until
from tests.support.webhook import Received, WebhookReceiver

SECRET = "hook-s3cret"
FORMATS = ("json", "alertmanager", "slack", "discord")
FAST = """
[serving]
autostart = false
[alerts]
retry_min_s = 0.05
retry_max_s = 0.2
group_window_s = 0
"""


def hooks(receiver: WebhookReceiver, secret_file: Path) -> str:
    text = FAST
    for fmt in FORMATS:
        text += f'[[alerts.webhooks]]\nurl = "{receiver.url}/{fmt}"\nformat = "{fmt}"\n'
        text += 'min_severity = "info"\n' if fmt == "json" else ""
        text += f'secret_file = "{secret_file}"\n' if fmt == "json" else ""
    return text


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def fleetd(tmp_path_factory: pytest.TempPathFactory, receiver: WebhookReceiver) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("alerts")
    secret_file = tmp / "hook.secret"
    secret_file.write_text(SECRET + "\n")
    config = tmp / "fleet.toml"
    config.write_text(hooks(receiver, secret_file))
    daemon = start_fleetd(tmp, tmp / "state", config=config)
    yield daemon
    stop_all([daemon])


def at(path: str) -> Any:
    return lambda rs: [r for r in rs if r.path == path]


def matching(receiver: WebhookReceiver, path: str, what: str, test: Any) -> Received:
    """Wait for a request at ``path`` whose JSON body passes ``test``."""
    got = receiver.wait_for(lambda rs: any(r.path == path and test(r.json()) for r in rs), 10, what)
    return next(r for r in got if r.path == path and test(r.json()))


def fleetctl(daemon: Fleetd, *args: str) -> Any:
    return run_fleetctl_here("--url", daemon.url, *args, env={"FLEETCTL_TOKEN": daemon.token})


def test_an_xid_reaches_every_format_signed_where_asked(
    fleetd: Fleetd, receiver: WebhookReceiver
) -> None:
    assert fleetd.post("/api/v1/sim/xid", {"card": 2, "xid": 79}).status_code == 200

    def is_xid(doc: Any) -> bool:
        return "Xid 79" in json.dumps(doc)

    # One page per cause: the latch's, naming the Xid; the Xid's own alert folds into it.
    def is_latch_alert(doc: Any) -> bool:
        return is_xid(doc) and doc["labels"].get("alertname") == "RebootRequired"

    plain = matching(receiver, "/json", "the json body", is_latch_alert)
    doc = plain.json()
    assert doc["schema"] == "cmpfleet.alert" and doc["version"] == 1
    assert doc["severity"] == "critical" and doc["status"] == "firing"
    assert "Xid 79 (GPU has fallen off the bus) on card 2" in doc["summary"]
    assert doc["id"] == plain.headers["X-Cmpfleet-Id"]
    assert verify(SECRET.encode(), plain.body, plain.headers["X-Cmpfleet-Signature"])

    am = matching(
        receiver,
        "/alertmanager",
        "the webhook v4 body",
        lambda doc: is_xid(doc) and doc["alerts"][0]["labels"]["alertname"] == "RebootRequired",
    ).json()
    assert am["version"] == "4" and am["alerts"][0]["labels"]["alertname"] == "RebootRequired"
    assert am["alerts"][0]["labels"]["severity"] == "critical"
    slack = matching(receiver, "/slack", "the slack body", is_xid)
    assert slack.json()["text"].startswith(":red_circle: *CRITICAL on ")
    assert "X-Cmpfleet-Signature" not in slack.headers  # no secret for this sink
    discord = matching(receiver, "/discord", "the discord body", is_xid).json()
    assert discord["embeds"][0]["color"] == 0xD0021B


def test_a_check_fires_then_resolves(fleetd: Fleetd, receiver: WebhookReceiver) -> None:
    assert fleetd.post("/api/v1/sim/card/3", {"temperature_c": 97.0}).status_code == 200

    def thermal(status: str) -> Any:
        return lambda doc: doc["name"] == "Thermal" and doc["status"] == status

    fired = matching(receiver, "/json", "the thermal alert", thermal("firing")).json()
    assert fired["severity"] == "critical" and "card 3" in fired["summary"]
    assert fired["advice"]  # the check's remedy
    assert fleetd.post("/api/v1/sim/card/3", {"temperature_c": 50.0}).status_code == 200
    resolved = matching(receiver, "/json", "the thermal resolve", thermal("resolved")).json()
    assert resolved["alert_id"] == fired["alert_id"] and resolved["resolved_at"]
    am = matching(
        receiver,
        "/alertmanager",
        "the resolve in v4",
        lambda d: d["status"] == "resolved" and d["groupLabels"]["alertname"] == "Thermal",
    ).json()
    assert am["alerts"][0]["endsAt"] != "0001-01-01T00:00:00Z"


def test_fleetctl_alerts_lists_alerts_and_their_delivery(
    fleetd: Fleetd, receiver: WebhookReceiver
) -> None:
    assert fleetd.post("/api/v1/sim/xid", {"card": 0, "xid": 13}).status_code == 200
    matching(receiver, "/json", "the Xid 13 alert", lambda d: d["labels"].get("xid") == 13)
    wait_until(
        lambda: all(s["pending"] == 0 for s in fleetd.get("/api/v1/alerts").json()["sinks"]),
        10,
        "every sink drained",
    )
    result = fleetctl(fleetd, "alerts", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [s["name"] for s in doc["sinks"]] == list(FORMATS)
    assert doc["sinks"][0]["signed"] is True and SECRET not in result.stdout
    xid13 = next(a for a in doc["alerts"] if a["labels"].get("xid") == 13)
    assert xid13["severity"] == "warning" and xid13["status"] == "firing"
    assert {d["sink"]: d["state"] for d in xid13["deliveries"]} == dict.fromkeys(
        FORMATS, "delivered"
    )
    human = fleetctl(fleetd, "alerts", "--limit", "5")
    assert human.returncode == 0, human.stderr
    assert "sink json: json http://127.0.0.1:" in human.stdout
    assert "json: delivered" in human.stdout and "Xid 13" in human.stdout


def test_fleetctl_alerts_test(fleetd: Fleetd, receiver: WebhookReceiver) -> None:
    result = fleetctl(fleetd, "alerts", "test", "--sink", "slack")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "slack: delivered"
    test_alert = matching(receiver, "/slack", "the test alert", lambda d: "Test alert" in d["text"])
    assert test_alert.headers["X-Cmpfleet-Id"] in test_alert.json()["text"]
    assert SECRET not in fleetd.log() and "/discord" not in fleetd.log()
    unknown = fleetctl(fleetd, "alerts", "test", "--sink", "pager")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == (
        "fleetctl: no sink named 'pager': configured are json, alertmanager, slack, discord"
    )
    assert fleetd.post("/api/v1/alerts/test", {}, token=None).status_code == 401


def test_a_hardware_xid_requires_a_reboot_and_the_reboot_resolves(
    fleetd: Fleetd, receiver: WebhookReceiver
) -> None:
    assert fleetd.post("/api/v1/sim/xid", {"card": 3, "xid": 79}).status_code == 200

    def reboot_required(status: str) -> Any:
        return lambda doc: doc["name"] == "RebootRequired" and doc["status"] == status

    fired = matching(receiver, "/json", "RebootRequired", reboot_required("firing")).json()
    assert fired["severity"] == "critical" and fired["summary"].startswith("Reboot required: ")
    assert fired["advice"]
    # The recovery decision behind the latch is not sent a second time.
    assert not [b for b in receiver.bodies("/json") if b["name"] == "Recovery"]
    assert fleetd.post("/api/v1/sim/reboot").status_code == 200
    matching(receiver, "/json", "RebootRequired resolved", reboot_required("resolved"))
    # One page per cause: the Xid's own alert folded into the latch's, never sent alone.
    assert not [b for b in receiver.bodies("/json") if b["name"] == "XidHardware"]
    stored = fleetd.get("/api/v1/alerts").json()["alerts"]
    assert any(a["labels"].get("alertname") == "XidHardware" for a in stored)


def test_killed_with_undelivered_alerts_delivers_after_restart(tmp_path: Path) -> None:
    receiver = WebhookReceiver()  # down while the alert is raised
    config = tmp_path / "fleet.toml"
    config.write_text(FAST + f'[[alerts.webhooks]]\nurl = "{receiver.url}/hook"\n')
    state = tmp_path / "state"
    daemon = start_fleetd(tmp_path, state, config=config)
    try:
        assert daemon.post("/api/v1/sim/xid", {"card": 1, "xid": 79}).status_code == 200

        def waiting() -> list[dict[str, Any]]:
            alerts = daemon.get("/api/v1/alerts").json()["alerts"]
            return [d for a in alerts for d in a["deliveries"] if d["state"] == "retrying"]

        wait_until(waiting, 10, "a delivery failing")
        (pending,) = waiting()
        daemon.stop(signal.SIGKILL)
        receiver.start()
        again = start_fleetd(tmp_path, state, config=config)
        try:
            got = receiver.wait_for(
                lambda rs: (
                    {pending["id"]} <= {r.json()["id"] for r in rs}
                    and any(r.json()["name"] == "DaemonUncleanStop" for r in rs)
                ),
                15,
                "the undelivered Xid alert and the unclean-stop alert",
            )
        finally:
            stop_all([again])
    finally:
        stop_all([daemon])
        receiver.stop()
    first = got[0].json()
    assert first["id"] == pending["id"] and "Xid 79" in first["summary"]  # oldest first
    unclean = next(r.json() for r in got if r.json()["name"] == "DaemonUncleanStop")
    assert unclean["severity"] == "warning" and "unclean stop" in unclean["summary"]
