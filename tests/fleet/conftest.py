"""Two live simulated rigs shared by the fleet tests: one healthy, one hit by an Xid 31.

Package-scoped: ``fleet status``, the Prometheus scrape and the dashboard check all read
the same two daemons, so the suite pays for two fleetd starts, not one per test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fleet_rigs import XID_CARD, TwoRigs
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until
from tests.support.token_peer import peer  # noqa: F401 - the loopback token peer, reused here


def _card_judged_critical(daemon: Fleetd, card: int) -> bool:
    """The Xid is counted and the card judged on it: the counter moves with the kernel log
    reader, the card's state with the next poll, and the tests read both."""
    cards = daemon.get("/api/v1/status").json()["cards"]
    row = next(c for c in cards if c["index"] == card)
    return int(row["xid_since_boot"]) >= 1 and row.get("state") == "critical"


@pytest.fixture(scope="package")
def two_rigs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoRigs]:
    tmp = tmp_path_factory.mktemp("rigs")
    daemons: list[Fleetd] = []
    try:
        daemons.append(start_fleetd(tmp, tmp / "healthy-state"))
        daemons.append(start_fleetd(tmp, tmp / "xid-state"))
        healthy, xid = daemons
        # A real-format NVRM line into the simulated kernel log, read by the normal path.
        answer = xid.post("/api/v1/sim/xid", {"card": XID_CARD, "xid": 31})
        assert answer.status_code == 200, answer.text
        wait_until(lambda: _card_judged_critical(xid, XID_CARD), 10, "fleetd to judge the Xid 31")
        yield TwoRigs(healthy=healthy, xid=xid)
    finally:
        stop_all(daemons)
