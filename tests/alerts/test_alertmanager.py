"""A real Alertmanager on loopback gets cmpfleet's alerts through ``alertmanager_api``,
lists them through its own API, and resolves them when cmpfleet resolves them."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.support import loopback
from tests.support.external import require_program
from tests.support.fleetd import Fleetd, free_port, start_fleetd, stop_all, wait_until

AM_CONFIG = """
route:
  receiver: nobody
receivers:
  - name: nobody
"""


@dataclass
class Alertmanager:
    """A running Alertmanager child process."""

    url: str
    proc: subprocess.Popen[bytes]

    def alerts(self, **params: str) -> list[dict[str, Any]]:
        """``GET /api/v2/alerts`` (by default: active, silenced, inhibited, unprocessed)."""
        response = loopback.get(f"{self.url}/api/v2/alerts", params=params, timeout=5)
        response.raise_for_status()
        return list(response.json())


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Alertmanager]:
    binary = require_program("prometheus-alertmanager", "prometheus-alertmanager")
    tmp = tmp_path_factory.mktemp("am")
    (tmp / "am.yml").write_text(AM_CONFIG)
    port = free_port()
    log = (tmp / "am.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp / 'am.yml'}",
            f"--storage.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",  # no gossip: a lone Alertmanager on loopback
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    am = Alertmanager(f"http://127.0.0.1:{port}", proc)

    def ready() -> bool:
        assert proc.poll() is None, (tmp / "am.log").read_text()
        try:
            return loopback.get(f"{am.url}/-/ready", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(ready, 20, "Alertmanager ready")
        yield am
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


@pytest.fixture(scope="module")
def fleetd(
    tmp_path_factory: pytest.TempPathFactory, alertmanager: Alertmanager
) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("am-fleetd")
    config = tmp / "fleet.toml"
    config.write_text(
        "[serving]\nautostart = false\n"
        "[alerts]\nretry_min_s = 0.05\nretry_max_s = 0.2\ngroup_window_s = 0\n"
        f'[[alerts.webhooks]]\nurl = "{alertmanager.url}"\nformat = "alertmanager_api"\n'
    )
    daemon = start_fleetd(tmp, tmp / "state", config=config)
    yield daemon
    stop_all([daemon])


def named(am: Alertmanager, name: str, **params: str) -> list[dict[str, Any]]:
    return [a for a in am.alerts(**params) if a["labels"].get("alertname") == name]


def test_alertmanager_lists_cmpfleet_alerts_and_sees_them_resolve(
    fleetd: Fleetd, alertmanager: Alertmanager
) -> None:
    assert fleetd.post("/api/v1/sim/card/2", {"temperature_c": 97.0}).status_code == 200
    wait_until(lambda: named(alertmanager, "Thermal"), 15, "Thermal listed by Alertmanager")
    (alert,) = named(alertmanager, "Thermal")
    assert alert["status"]["state"] == "active"
    assert alert["labels"]["severity"] == "critical" and alert["labels"]["card"] == "2"
    assert alert["labels"]["source"] == "cmpfleet" and alert["labels"]["instance"]
    assert "card 2" in alert["annotations"]["summary"] and alert["annotations"]["description"]
    ours = fleetd.get("/api/v1/alerts?status=firing").json()["alerts"]
    thermal = next(a for a in ours if a["labels"].get("alertname") == "Thermal")
    assert alert["startsAt"][:19] == thermal["started_at"][:19]

    assert fleetd.post("/api/v1/sim/card/2", {"temperature_c": 50.0}).status_code == 200
    wait_until(
        lambda: not named(alertmanager, "Thermal"), 15, "Thermal no longer active in Alertmanager"
    )
    # Alertmanager has the resolve a moment before fleetd records its answer as delivered.
    wait_until(
        lambda: (
            [d["state"] for d in alert_row(fleetd, thermal["id"])["deliveries"]]
            == ["delivered", "delivered"]
        ),
        10,
        "both deliveries (firing, resolved) recorded",
    )
    resolved = alert_row(fleetd, thermal["id"])
    assert resolved["status"] == "resolved"


def test_an_xid_lands_in_alertmanager_and_a_reboot_resolves_it(
    fleetd: Fleetd, alertmanager: Alertmanager
) -> None:
    assert fleetd.post("/api/v1/sim/xid", {"card": 1, "xid": 79}).status_code == 200
    # One page per cause: the latch's, naming the Xid (its own alert folds into it).
    wait_until(lambda: named(alertmanager, "RebootRequired"), 15, "RebootRequired in Alertmanager")
    (alert,) = named(alertmanager, "RebootRequired")
    assert "Xid 79" in alert["annotations"]["summary"]
    assert not named(alertmanager, "XidHardware")
    assert fleetd.post("/api/v1/sim/reboot").status_code == 200
    wait_until(lambda: not named(alertmanager, "RebootRequired"), 15, "the latch resolved")


def alert_row(fleetd: Fleetd, alert_id: int) -> dict[str, Any]:
    """One alert of fleetd's, with its deliveries."""
    row: dict[str, Any] = fleetd.get(f"/api/v1/alerts/{alert_id}").json()
    return row
