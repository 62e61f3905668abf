"""The black box's other scenarios end to end, each on a real fleetd and engine.

``kv-drift``: after a simulated reboot card 2 reports 4 GiB less; the next ready's KV pool
(the simulated engine's vLLM line, sized from the cards) is smaller than the last good
boot's, and the warning names the drop and the card. ``rank-repeat``: an illegal memory
access on PP rank 3 (the day sped up: SIGUSR1 crashes the engine at once), each with an
Xid 31 on card 3; the third escalates to the memory-test advice in one notification.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until
from tests.support.webhook import WebhookReceiver

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=15)

CONFIG = """
[serving]
probe_interval_s = 0.3

[alerts]
retry_min_s = 0.05
retry_max_s = 0.2
group_window_s = 0

[[alerts.webhooks]]
url = "{url}/hook"
min_severity = "info"
"""


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver().start()
    yield server
    server.stop()


@pytest.fixture
def daemons() -> Iterator[list[Fleetd]]:
    started: list[Fleetd] = []
    yield started
    stop_all(started)


def start(
    tmp_path: Path, scenario: str, receiver: WebhookReceiver, daemons: list[Fleetd]
) -> Fleetd:
    config = tmp_path / "fleet.toml"
    config.write_text(CONFIG.format(url=receiver.url))
    daemon = start_fleetd(
        tmp_path,
        tmp_path / "state",
        simulate=scenario,
        config=config,
        env={"CMPFLEET_SIM_ENGINE_READY_AFTER_S": "0.5"},
    )
    daemons.append(daemon)
    return daemon


def status(daemon: Fleetd) -> dict[str, Any]:
    document: dict[str, Any] = daemon.get("/api/v1/status").json()
    return document


def ready_with_pid(daemon: Fleetd, other_than: int | None = None) -> int:
    def ready() -> bool:
        serving = status(daemon)["serving"]
        return bool(serving["state"] == "ready" and serving["pid"] != other_than)

    wait_until(ready, 60, "the engine ready")
    return int(status(daemon)["serving"]["pid"])


def fingerprint(daemon: Fleetd) -> dict[str, Any] | None:
    found: dict[str, Any] | None = (status(daemon)["recovery"].get("evidence") or {}).get(
        "fingerprint"
    )
    return found


def test_kv_drift_names_the_drop_and_the_card(
    tmp_path: Path, receiver: WebhookReceiver, daemons: list[Fleetd]
) -> None:
    daemon = start(tmp_path, "kv-drift", receiver, daemons)
    first_pid = ready_with_pid(daemon)
    wait_until(lambda: fingerprint(daemon), 30, "the first boot's fingerprint")
    first = fingerprint(daemon)
    assert first is not None and first["kv_tokens"] > 0 and not first["warnings"]
    assert daemon.post("/api/v1/sim/reboot").status_code == 200
    ready_with_pid(daemon, other_than=first_pid)

    def drifted() -> bool:
        latest = fingerprint(daemon)
        return bool(latest and latest["warnings"])

    wait_until(drifted, 60, "the second boot's fingerprint warning")
    latest = fingerprint(daemon)
    assert latest is not None and latest["kv_tokens"] < first["kv_tokens"]
    [warning] = latest["warnings"]
    assert f"{latest['kv_tokens']:,} tokens" in warning and f"{first['kv_tokens']:,}" in warning
    assert "card 2" in warning and "61,440 MiB, was 65,536 MiB" in warning
    events = daemon.get("/api/v1/events?kind=crash").json()
    assert any("card 2" in event["message"] for event in events)
    receiver.wait_for(
        lambda got: any(b"KvPoolDrop" in r.body for r in got), 30, "the KvPoolDrop alert"
    )


def test_rank_repeat_escalates_the_third_once(
    tmp_path: Path, receiver: WebhookReceiver, daemons: list[Fleetd]
) -> None:
    daemon = start(tmp_path, "rank-repeat", receiver, daemons)
    pid: int | None = None
    for n in range(1, 4):
        pid = ready_with_pid(daemon, other_than=pid)
        os.kill(pid, signal.SIGUSR1)  # the day sped up: the crash now
        wait_until(
            lambda n=n: len(daemon.get("/api/v1/crashes").json()["crashes"]) >= n,
            60,
            f"bundle {n}",
        )
        wait_until(lambda: status(daemon)["recovery"]["reboot_required"], 30, "the latch")
        if n < 3:
            assert daemon.post("/api/v1/sim/reboot").status_code == 200
            wait_until(lambda: not status(daemon)["recovery"]["reboot_required"], 60, "the reboot")
    crashes = daemon.get("/api/v1/crashes").json()["crashes"]
    assert [c["card"] for c in crashes] == [3, 3, 3]
    assert [c["rank"] for c in crashes] == [3, 3, 3]
    assert {c["verdict"]["rule"] for c in crashes} == {"spec_verify_fault"}
    newest = crashes[0]
    assert newest["escalation"]["summary"] == (
        "third illegal memory access on card 3 (rank 3) in 7 days, all during speculative verify"
    )
    got = receiver.wait_for(
        lambda got: any(b"RecurringFault" in r.body for r in got), 30, "the escalation"
    )
    recurring = [r for r in got if b"RecurringFault" in r.body]
    assert len(recurring) == 1
    assert b"stress memory test of card 3" in recurring[0].body
