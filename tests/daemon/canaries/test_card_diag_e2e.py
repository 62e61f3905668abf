"""``fleetctl diag pcie|compute`` end to end: a real fleetd on ``bad-sm``, a real fleetctl.

Refused while the engine runs (exit 4); with it stopped, compute finds card 1's SM 17
(exit 2, naming it) and passes the others, pcie passes every card; each run is a ``diag``
event carrying the cards' identities (what the passport reads).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until

pytestmark = pytest.mark.slow(seconds=5)


def fleetctl(daemon: Fleetd, *args: str) -> Any:
    return run_fleetctl_here("--url", daemon.url, *args, env={"FLEETCTL_TOKEN": daemon.token})


@pytest.fixture(scope="module")
def bad_sm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("bad-sm")
    config = tmp / "fleet.toml"
    config.write_text("[serving]\nstop_timeout_s = 5\n")
    daemon = start_fleetd(tmp, tmp / "state", simulate="bad-sm", config=config)
    try:
        yield daemon
    finally:
        stop_all([daemon])


def test_compute_names_the_sm_and_pcie_passes(bad_sm: Fleetd) -> None:
    wait_until(
        lambda: bad_sm.get("/api/v1/status").json()["serving"]["state"] == "ready", 30, "engine"
    )
    refused = fleetctl(bad_sm, "diag", "compute")
    assert refused.returncode == 4, refused.stderr
    assert "stop it first" in refused.stderr
    stopped = fleetctl(bad_sm, "stop")
    assert stopped.returncode == 0, stopped.stderr

    found = fleetctl(bad_sm, "diag", "compute", "--json")
    assert found.returncode == 2, found.stderr
    document = json.loads(found.stdout)
    outcomes = {card["card"]: card["outcome"] for card in document["cards"]}
    assert outcomes == {0: "passed", 1: "failed", 2: "passed", 3: "passed"}
    card1 = document["cards"][1]
    assert card1["figures"]["bad_sms"] == [17] and card1["uuid"]
    human = fleetctl(bad_sm, "diag", "compute", "--card", "1")
    assert human.returncode == 2
    assert "card 1: wrong results on SM 17" in human.stdout

    link = fleetctl(bad_sm, "diag", "pcie", "--json")
    assert link.returncode == 0, link.stderr
    assert {c["outcome"] for c in json.loads(link.stdout)["cards"]} == {"passed"}

    events = fleetctl(bad_sm, "events", "--kind", "diag", "--json")
    messages = [event["message"] for event in json.loads(events.stdout)]
    assert any(m.startswith("compute diagnostic found a problem on card(s) 1") for m in messages)
    assert any(m.startswith("pcie diagnostic passed") for m in messages)

    unknown = fleetctl(bad_sm, "diag", "compute", "--card", "9")
    assert unknown.returncode != 0 and "card 9 does not exist" in unknown.stderr
