"""One notification per cause at the first firing, on a real fleetd per scenario.

``stock-kernel`` sent HostKernelDrift, Bar1Lost and P2pLost; ``xid31`` and ``cuda-wedge``
RebootRequired plus XidHardware or CheckCudaProbe. Each now sends its cause alone, the
symptoms stored (``fleetctl alerts``) and folded into it, never sent on their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until
from tests.support.scenarios import sooner
from tests.support.webhook import WebhookReceiver

pytestmark = pytest.mark.slow(seconds=5)
DEADLINE_S = 90.0
# scenario -> (the cause, the symptoms folded into it)
CASES = {
    "stock-kernel": ("HostKernelDrift", {"Bar1Lost", "P2pLost"}),
    "xid31": ("RebootRequired", {"XidHardware"}),
    "cuda-wedge": ("RebootRequired", {"CheckCudaProbe"}),
}


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver().start()
    yield server
    server.stop()


def _start(tmp: Path, scenario: str, receiver: WebhookReceiver) -> Fleetd:
    config = tmp / "fleet.toml"
    config.write_text(
        "[poll]\ninterval_s = 0.5\n[canary]\nenabled = false\n"
        "[alerts]\nretry_min_s = 0.05\nretry_max_s = 0.2\n"
        f'[[alerts.webhooks]]\nurl = "{receiver.url}/json"\nformat = "json"\n'
    )
    simulate = str(sooner(tmp, scenario)) if scenario == "xid31" else scenario
    return start_fleetd(tmp, tmp / "state", simulate=simulate, config=config)


def _stored(daemon: Fleetd) -> list[dict[str, Any]]:
    alerts: list[dict[str, Any]] = daemon.get("/api/v1/alerts").json()["alerts"]
    return alerts


@pytest.mark.parametrize("scenario", sorted(CASES))
def test_the_first_firing_is_one_notification(
    tmp_path: Path, receiver: WebhookReceiver, scenario: str
) -> None:
    cause, symptoms = CASES[scenario]
    daemon = _start(tmp_path, scenario, receiver)
    try:

        def names() -> set[str]:
            return {str(a["labels"].get("alertname")) for a in _stored(daemon)}

        wait_until(lambda: {cause, *symptoms} <= names(), DEADLINE_S, f"{scenario}'s alerts")
        wait_until(
            lambda: all(s["pending"] == 0 for s in daemon.get("/api/v1/alerts").json()["sinks"]),
            DEADLINE_S,
            "the webhook drained",
        )
        sent = [r.json() for r in receiver.requests if r.path == "/json"]
        firing = [d["name"] for d in sent if d["status"] == "firing"]
        assert firing == [cause], firing
        for alert in _stored(daemon):
            if alert["labels"].get("alertname") in symptoms:
                assert alert["status"] == "firing" and alert["deliveries"] == [], alert
    finally:
        stop_all([daemon])
