"""The documented fleetctl surface (docs/reference.md) taken literally, against one fleetd.

``--json`` before the command and at its end, for every command, prints one JSON document
and nothing else on stdout; the status document carries every listed key; ``events``
filters; the token comes from ``--token-file``, else ``$FLEETCTL_TOKEN``, else the state
dir; a record in the host's real ``/dev/kmsg`` never reaches a simulated rig. One daemon
for the module (its engine ready in 0.5 s); each test leaves the rig as it found it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_fleetctl_here
from tests.support.contract import (
    CONTRACT_CANARY_NAMES,
    CONTRACT_CARD_KEYS,
    CONTRACT_CHECK_IDS,
    CONTRACT_EVENT_KEYS,
    CONTRACT_SERVING_STATES,
)
from tests.support.engine_e2e import fast_config, healthy_with_engine, serving
from tests.support.external import require_root
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until
from web.version import __version__

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=20)

KERN_LOG = Path(__file__).resolve().parents[2] / "examples" / "kern.log"


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("contract")
    scenario = healthy_with_engine(tmp / "quick.toml", "\n[engine]\nready_after_s = 0.5\n")
    daemon = start_fleetd(tmp, tmp / "state", simulate=str(scenario), config=fast_config(tmp))
    wait_until(lambda: serving(daemon)["state"] == "ready", 30, "engine ready")
    # The first canary round changes ``canary status``'s exit code (nothing verified: 1):
    # two calls compared across it disagree, so the module starts after it.
    wait_until(lambda: first_round_done(daemon), 60, "the first canary round")
    yield daemon
    stop_all([daemon])


def first_round_done(daemon: Fleetd) -> bool:
    canaries = daemon.get("/api/v1/canary").json().get("canaries") or []
    return bool(canaries) and all(c.get("ts") for c in canaries)  # "skipped", ts None: not yet


def cli(daemon: Fleetd, *args: str, env: dict[str, str] | None = None) -> Any:
    """fleetctl against ``daemon``, finding its token in its state dir as a local user does."""
    base = {"CMPFLEET_STATE_DIR": str(daemon.state_dir), "FLEETCTL_TOKEN": ""}
    return run_fleetctl_here("--url", daemon.url, *args, env={**base, **(env or {})})


def one_document(result: subprocess.CompletedProcess[str]) -> Any:
    """stdout is exactly one JSON document (``json.loads`` refuses anything around it)."""
    try:
        return json.loads(result.stdout)
    except ValueError:
        raise AssertionError(
            f"not one JSON document (exit {result.returncode}): {result.stdout[:300]!r}; "
            f"stderr {result.stderr[-300:]!r}"
        ) from None


def shape(document: Any) -> object:
    return sorted(document) if isinstance(document, dict) else type(document).__name__


def both_positions(
    daemon: Fleetd, argv: tuple[str, ...], *, at_once: bool = True
) -> tuple[Any, Any]:
    """``fleetctl --json ARGV`` and ``fleetctl ARGV --json``: same exit code, same shape.

    Readers run at once (half the wall time); commands that change the engine one by one.
    """
    with ThreadPoolExecutor(2 if at_once else 1) as pool:
        before = pool.submit(cli, daemon, "--json", *argv)
        after = pool.submit(cli, daemon, *argv, "--json")
        first, last = before.result(), after.result()
    assert first.returncode == last.returncode, (argv, first.stderr, last.stderr)
    documents = one_document(first), one_document(last)
    assert shape(documents[0]) == shape(documents[1]), argv
    return documents


READ_ONLY = [
    ("status",),
    ("events", "--limit", "3"),
    ("logs", "--lines", "5"),
    ("canary", "status"),
    ("recipe", "show"),
    ("reboot",),  # without --confirm: only explains
    ("alerts",),
    ("xid", "scan", str(KERN_LOG)),
]


@pytest.mark.parametrize("argv", READ_ONLY, ids=" ".join)
def test_json_before_or_after_any_command_is_one_document(
    rig: Fleetd, argv: tuple[str, ...]
) -> None:
    first, _ = both_positions(rig, argv)
    if argv[0] == "status":
        assert first["overall"] == "ok"


def test_json_in_either_place_for_the_engine_and_latch_commands(rig: Fleetd) -> None:
    """The commands that change something, one place each (the engine's cycles are the
    slow part), in an order that leaves the engine ready."""
    stopped = one_document(cli(rig, "--json", "stop"))
    assert stopped["serving"]["state"] == "stopped", stopped
    started = one_document(cli(rig, "start", "--json"))
    assert started["serving"]["state"] == "ready", started
    restarted = one_document(cli(rig, "--json", "restart"))
    assert restarted["serving"]["state"] == "ready", restarted
    both_positions(
        rig, ("clear-reboot-latch", "--reason", "contract test: latch not set"), at_once=False
    )
    event_id = str(events(rig, "--limit", "1")[0]["id"])
    acked, _ = both_positions(rig, ("ack", event_id), at_once=False)
    assert acked["acked"] is True
    both_positions(rig, ("caps", "apply"), at_once=False)


def test_top_and_fleet_top_json_is_one_frame_as_data(rig: Fleetd, tmp_path: Path) -> None:
    top, _ = both_positions(rig, ("top",))
    assert set(top) >= {"overall", "cards", "checks", "serving", "recovery"}
    fleet = tmp_path / "rigs.toml"
    fleet.write_text(f'[rigs.here]\nurl = "{rig.url}"\n')
    # The module's engine moves (stop, start, restart) settle before the rig reads ok again.
    wait_until(lambda: rig.get("/api/v1/status").json()["overall"] == "ok", 60, "the rig ok")
    doc, _ = both_positions(rig, ("fleet", "top", "--fleet", str(fleet)))
    assert doc["overall"] == "ok" and [r["rig"] for r in doc["rigs"]] == ["here"]


def test_logs_follow_json_is_one_json_string_per_line(rig: Fleetd) -> None:
    argv = [sys.executable, "-m", "daemon.fleetctl", "--url", rig.url, "logs", "-f", "--json"]
    env = {**os.environ, "CMPFLEET_STATE_DIR": str(rig.state_dir), "FLEETCTL_TOKEN": ""}
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env) as follower:
        assert follower.stdout is not None
        try:
            lines = [follower.stdout.readline() for _ in range(3)]
        finally:
            follower.terminate()
    assert all(isinstance(json.loads(line), str) for line in lines), lines


def status(daemon: Fleetd) -> dict[str, Any]:
    doc: dict[str, Any] = one_document(cli(daemon, "status", "--json"))
    return doc


def events(daemon: Fleetd, *args: str) -> list[dict[str, Any]]:
    result = cli(daemon, "events", *args, "--json")
    assert result.returncode == 0, result.stderr
    found: list[dict[str, Any]] = one_document(result)
    return found


def test_the_status_document_has_every_listed_key(rig: Fleetd) -> None:
    doc = status(rig)
    assert doc["overall"] in {"ok", "warning", "critical", "unknown"}
    assert len(doc["cards"]) == 4
    for card in doc["cards"]:
        assert set(card) >= CONTRACT_CARD_KEYS
    assert [card["index"] for card in doc["cards"]] == [0, 1, 2, 3]
    assert {check["id"] for check in doc["checks"]} >= CONTRACT_CHECK_IDS | {"kernel_log"}
    for check in doc["checks"]:
        assert set(check) >= {"id", "card", "severity", "message", "remedy"}
        assert check["severity"] in {"ok", "warning", "critical"}
    assert set(doc["serving"]) >= {"state", "pid", "restarts", "since", "url"}
    assert doc["serving"]["state"] in CONTRACT_SERVING_STATES
    assert datetime.fromisoformat(doc["serving"]["since"]).utcoffset() is not None
    assert isinstance(doc["serving"]["restarts"], int)
    assert set(doc["recovery"]) >= {"reboot_required", "reason", "since", "advice"}
    assert {c["name"] for c in doc["canaries"]} >= CONTRACT_CANARY_NAMES
    for canary in doc["canaries"]:
        assert set(canary) >= {"name", "result", "figure", "advice", "ts"}
        # The reference: stale is from before the engine's current run (a test above restarts it).
        assert canary["result"] in {"pass", "warn", "fail", "skipped", "stale"}, canary
    assert rig.get("/api/v1/status").json().keys() == doc.keys()


def test_token_from_the_flag_then_the_environment_then_the_state_dir(
    rig: Fleetd, tmp_path: Path
) -> None:
    good, wrong = tmp_path / "good", tmp_path / "wrong"
    good.write_text(rig.token + "\n")
    wrong.write_text("not-the-token\n")
    event_id = str(events(rig, "--limit", "1")[0]["id"])
    elsewhere = {"CMPFLEET_STATE_DIR": str(tmp_path / "no-state")}

    def ack(*flags: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        result: subprocess.CompletedProcess[str] = cli(rig, *flags, "ack", event_id, env=env)
        return result

    # --token-file wins over the environment, the environment over the state dir.
    assert ack("--token-file", str(good), env={"FLEETCTL_TOKEN": "nope"}).returncode == 0
    refused = ack("--token-file", str(wrong), env={"FLEETCTL_TOKEN": rig.token})
    assert refused.returncode == 1
    # The refusal names the one token used, not every place a token could come from.
    assert refused.stderr.strip() == (
        f"fleetctl: fleetd refused the token from token file {wrong} (--token-file): "
        "use the daemon's <state-dir>/api-token"
    )
    by_env = ack(env={"FLEETCTL_TOKEN": "nope"})
    assert "refused the token from $FLEETCTL_TOKEN:" in by_env.stderr
    assert ack(env={"FLEETCTL_TOKEN": rig.token, **elsewhere}).returncode == 0
    assert ack(env={"FLEETCTL_TOKEN": "nope"}).returncode == 1
    assert ack(env={}).returncode == 0  # the state dir's api-token, readable by this user
    assert ack(env=elsewhere).returncode == 1  # no token anywhere: 401, one line
    missing = ack("--token-file", str(tmp_path / "absent"), env={})
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        f"fleetctl: cannot read token file {tmp_path / 'absent'} (--token-file): "
        "No such file or directory"
    ]


def test_every_listed_route_answers_over_http(rig: Fleetd) -> None:
    assert rig.get("/healthz").json() == {"status": "ok", "version": __version__}
    assert rig.get("/api/v1/events").status_code == 200
    assert rig.post("/api/v1/recovery/clear", {"reason": "contract test"}).status_code == 200
    explained = rig.post("/api/v1/recovery/reboot", {"confirm": False})
    assert explained.status_code == 200, explained.text
    assert serving(rig)["state"] == "ready", "an unconfirmed reboot must change nothing"
    logs = rig.get("/api/v1/serving/logs")
    assert logs.status_code in (401, 403), "the engine log needs the token even on loopback"
    for action in ("stop", "start", "restart"):
        assert rig.post(f"/api/v1/serving/{action}", token=None).status_code == 401
        assert rig.post(f"/api/v1/serving/{action}", token="nope").status_code == 403
    metrics = rig.get("/metrics").text
    assert 'gpu="0"' in metrics and "pci_bus_id=" in metrics and "uuid=" in metrics
    assert "cmpfleet_" in metrics
    paths = set(rig.get("/openapi.json").json()["paths"])
    listed = {"/api/v1/status", "/api/v1/events", "/api/v1/events/{event_id}/ack"}
    listed |= {"/api/v1/serving/logs", "/api/v1/recovery/reboot", "/api/v1/recovery/clear"}
    assert listed <= paths, listed - paths
    assert rig.get("/docs").status_code == 200 and rig.get("/").status_code == 200


def test_status_exits_like_a_monitoring_plugin_on_a_changing_rig(rig: Fleetd) -> None:
    """0 OK, 1 WARNING (a warm card), 2 CRITICAL (a locked card), 0 again once fixed."""

    last: list[str] = []

    def exits(code: int) -> bool:
        shown = cli(rig, "status")
        last[:] = [f"exit {shown.returncode}: {shown.stdout}{shown.stderr}"]
        return bool(shown.returncode == code)

    def settles(code: int, what: str) -> None:
        try:
            wait_until(lambda: exits(code), 10, what)
        except AssertionError as failed:  # which verdict it was, and why, in the report
            raise AssertionError(f"{failed}; last status: {last}") from None

    settles(0, "OK on the healthy rig")
    try:
        assert rig.post("/api/v1/sim/card/1", {"temperature_c": 82.0}).status_code == 200
        settles(1, "WARNING for card 1 at 82 C")
        assert rig.post("/api/v1/sim/card/2", {"memory_total_mib": 8192}).status_code == 200
        settles(2, "CRITICAL for the locked card 2")
        locked = [c for c in status(rig)["checks"] if c["severity"] == "critical"]
        assert [(c["id"], c["card"]) for c in locked] == [("vram_unlocked", 2)]
    finally:
        rig.post("/api/v1/sim/card/1", {"temperature_c": 50.0})
        rig.post("/api/v1/sim/card/2", {"memory_total_mib": 65536})
    settles(0, "OK once both are put back")


# Last in the file: the Xid it injects stays in this boot's picture (xid_since_boot).
@pytest.mark.root
def test_events_filters_and_a_real_kmsg_record_never_reaches_the_simulation(rig: Fleetd) -> None:
    """An Xid line a process writes to the host's /dev/kmsg is not seen; the simulated
    kernel log's next one is (so the daemon was reading when the real one was there)."""
    require_root("writes a user-facility record to /dev/kmsg")
    card0 = status(rig)["cards"][0]["pci_bus_id"]
    before = datetime.now(UTC) - timedelta(seconds=1)
    tag = f"cmpfleet-contract-{uuid.uuid4().hex[:8]}"
    real = f"NVRM: Xid (PCI:{card0[:-2]}): 43, pid=1, name={tag}, Ch 00000008"
    fd = os.open("/dev/kmsg", os.O_WRONLY)
    try:
        os.write(fd, f"<14>{real}\n".encode())
    finally:
        os.close(fd)
    # Xid 13 is application-class: it sets no latch, the other tests keep a healthy rig.
    assert rig.post("/api/v1/sim/xid", {"card": 0, "xid": 13}).status_code == 200
    since = before.isoformat()
    wait_until(lambda: events(rig, "--kind", "xid", "--since", since), 10, "the simulated Xid")
    found = events(rig, "--kind", "xid", "--since", since, "--limit", "10")
    assert [(e["card"], e["xid"]) for e in found] == [(0, 13)]
    (event,) = found
    assert set(event) >= CONTRACT_EVENT_KEYS
    assert datetime.fromisoformat(event["ts"]).utcoffset() is not None
    assert event["kind"] == "xid" and event["severity"] in {"info", "warning", "critical"}
    later = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    assert events(rig, "--kind", "xid", "--since", later) == []
    assert len(events(rig, "--limit", "2")) == 2
    assert all(e["kind"] == "xid" for e in events(rig, "--kind", "xid"))
    acked = cli(rig, "ack", str(event["id"]))
    assert acked.returncode == 0, acked.stderr
