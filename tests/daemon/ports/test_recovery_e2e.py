"""Recovery end to end: real fleetd processes, the real simulated engine, real HTTP.

Faults arrive as they would on a rig (an NVRM line in the kernel log, a card NVML calls
lost); the tests watch what fleetd does about them through the API and fleetctl. One
daemon per module where the tests can share it (each clears the latch it set).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine_e2e import fast_config, fleetctl, healthy_with_engine, serving
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until
from tests.support.scenarios import sooner
from tests.support.webhook import WebhookReceiver

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=50)

# The step's words end by the engine's state (stopping, then stopped): both begin so.
WARM = "reboot the host: fleetctl reboot --confirm"
COLD = "power the rig off for about 30 s"
DEADLINE_S = 20.0


def status(daemon: Fleetd) -> dict[str, Any]:
    doc: dict[str, Any] = daemon.get("/api/v1/status").json()
    return doc


def recovery(daemon: Fleetd) -> dict[str, Any]:
    block: dict[str, Any] = status(daemon)["recovery"]
    return block


def xid_result(daemon: Fleetd, card: int) -> dict[str, Any] | None:
    """The card's ``xid_since_boot`` result once it is critical (None before)."""
    for check in status(daemon)["checks"]:
        if check["id"] == "xid_since_boot" and check["card"] == card:
            return check if check["severity"] == "critical" else None
    return None


def latched(daemon: Fleetd) -> bool:
    return bool(recovery(daemon)["reboot_required"])


def inject(daemon: Fleetd, card: int, xid: int, message: str | None = None) -> None:
    body: dict[str, Any] = {"card": card, "xid": xid}
    if message is not None:
        body["message"] = message
    assert daemon.post("/api/v1/sim/xid", body).status_code == 200


def clear(daemon: Fleetd, reason: str = "test: next case") -> None:
    cleared = fleetctl(daemon, "clear-reboot-latch", "--reason", reason)
    assert cleared.returncode == 0, cleared.stderr
    assert not latched(daemon)


def actions(daemon: Fleetd) -> list[str]:
    return [d["action"] for d in recovery(daemon)["decisions"]]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    """One healthy simulated rig with its engine, shared by the fault tests below."""
    tmp = tmp_path_factory.mktemp("recovery")
    # Each case's automatic probe runs, however close to the last case's (not rate-limited).
    config = fast_config(tmp, "probe_min_interval_s = 0\n")
    daemon = start_fleetd(tmp, tmp / "state", config=config)
    wait_until(lambda: serving(daemon)["state"] == "ready", 30, "engine ready")
    yield daemon
    stop_all([daemon])


def test_xid_31_stops_the_engine_gracefully_and_latches_with_advice(rig: Fleetd) -> None:
    inject(rig, 1, 31)
    wait_until(lambda: latched(rig), DEADLINE_S, "the latch")
    block = recovery(rig)
    assert "Xid 31 (MMU page fault) on card 1" in block["reason"]
    assert block["advice"].startswith(WARM)
    assert block["since"]
    wait_until(lambda: serving(rig)["state"] == "stopped", DEADLINE_S, "engine stopped")
    assert serving(rig)["pid"] is None

    # Its own graceful signal: the simulated engine exits 0 on SIGINT (a SIGKILL shows 9).
    def launches_ended() -> list[str]:
        events = rig.get("/api/v1/events?kind=serving&limit=500").json()
        return [e["message"] for e in events if "engine launch ended" in e["message"]]

    def xid_stop_ended() -> list[str]:
        return [m for m in launches_ended() if m.startswith("engine launch ended: stopped (Xid 31")]

    wait_until(xid_stop_ended, DEADLINE_S, "the Xid 31 stop's launch end in the events")
    ended = xid_stop_ended()
    assert "exited with code 0" in ended[0], launches_ended()
    assert "stop_and_latch" in actions(rig)
    for command in ("restart", "start"):
        refused = fleetctl(rig, command)
        assert refused.returncode == 4, (command, refused.stderr)
        assert "reboot required: Xid 31 (MMU page fault) on card 1" in refused.stderr
    human = fleetctl(rig, "status")
    assert human.returncode == 2
    assert "REBOOT REQUIRED" in human.stdout and WARM in human.stdout
    clear(rig, "test: the card was checked")
    rows = rig.get("/api/v1/events?kind=operator&limit=20").json()
    assert any(
        "latch cleared by api (operator): test: the card was checked" in r["message"] for r in rows
    )


def test_after_an_xid_stop_no_canary_reads_pass(rig: Fleetd) -> None:
    """The last round's passes judged an engine that no longer serves: stale everywhere."""
    if serving(rig)["state"] != "ready":
        assert fleetctl(rig, "start").returncode == 0
    wait_until(
        lambda: {c["result"] for c in status(rig)["canaries"]} == {"pass"}, 60, "canaries pass"
    )
    inject(rig, 0, 31)
    wait_until(lambda: latched(rig), DEADLINE_S, "the latch")
    wait_until(lambda: serving(rig)["state"] == "stopped", DEADLINE_S, "engine stopped")
    canaries = status(rig)["canaries"]
    assert {c["result"] for c in canaries} == {"stale"}, canaries
    assert {c["last_result"] for c in canaries} == {"pass"}
    shown = fleetctl(rig, "canary", "status", "--json")
    assert shown.returncode == 1, shown.stdout  # nothing verified about what serves now
    assert "pass" not in {c["result"] for c in json.loads(shown.stdout)["canaries"]}
    scraped = rig.get("/metrics").text
    assert 'cmpfleet_canary_result{canary="copy_fidelity"} 3.0' in scraped
    assert not re.search(r"^cmpfleet_canary_copy_accuracy_ratio ", scraped, re.MULTILINE)
    clear(rig)


# The one recovery-action table (hwcheck.recovery_actions.RECOVERY_ACTIONS) as advice.
XID_154_ADVICE = {0x0: None, 0x1: WARM, 0x2: WARM, 0x3: WARM, 0x4: WARM, 0x6: WARM, 0x7: COLD}


def test_each_xid_154_recovery_action_code_gets_its_advice(rig: Fleetd) -> None:
    for code, advice in XID_154_ADVICE.items():
        message = f"GPU recovery action changed from 0x0 (None) to 0x{code:x} (Label Ignored)"
        inject(rig, 2, 154, message)
        if advice is None:
            wait_until(
                lambda: any(e["xid"] == 154 for e in rig.get("/api/v1/events?kind=xid").json()),
                DEADLINE_S,
                "the Xid 154 stored",
            )
            assert not latched(rig), f"code 0x{code:x} needs no reboot"
            continue
        wait_until(lambda: latched(rig), DEADLINE_S, f"the latch for code 0x{code:x}")
        block = recovery(rig)
        assert block["reason"].startswith("Xid 154 (recovery action") and block["reason"].endswith(
            " on card 2"
        ), block
        assert f"0x{code:x}" in block["reason"]
        assert block["advice"].startswith(advice), (code, block["advice"])
        assert serving(rig)["state"] == "stopped"
        clear(rig)


@pytest.mark.parametrize("xid", [119, 62])
def test_gsp_faults_advise_a_cold_power_cycle(rig: Fleetd, xid: int) -> None:
    inject(rig, 3, xid)
    wait_until(lambda: latched(rig), DEADLINE_S, "the latch")
    block = recovery(rig)
    assert block["reason"].startswith(f"Xid {xid} (") and block["reason"].endswith(" on card 3")
    assert block["advice"].startswith(COLD)
    assert "30 s" in block["advice"]
    clear(rig)


def test_nvml_recovery_action_field_asks_for_a_power_cycle(rig: Fleetd) -> None:
    """NVML field 230 code 7 (system reboot, GSP/PMU class) on a card that still answers."""
    assert rig.post("/api/v1/sim/card/0", {"recovery_action": 7}).status_code == 200
    wait_until(lambda: latched(rig), DEADLINE_S, "the latch for recovery action 7")
    block = recovery(rig)
    assert "card 0: NVML recovery action 7" in block["reason"]
    assert block["advice"].startswith(COLD)
    assert rig.post("/api/v1/sim/card/0", {"recovery_action": 0}).status_code == 200
    clear(rig)


def test_an_unknown_xid_is_recorded_and_advised_for_inspection(rig: Fleetd) -> None:
    inject(rig, 0, 4242)
    wait_until(lambda: "advise_inspection" in actions(rig), DEADLINE_S, "advice to inspect")
    assert not latched(rig)
    decision = next(d for d in recovery(rig)["decisions"] if d["action"] == "advise_inspection")
    assert "Xid 4242" in decision["reason"]
    # A suspicious event with the engine stopped: the cards are probed.
    wait_until(
        lambda: any("after Xid 4242" in (d["reason"] or "") for d in recovery(rig)["decisions"]),
        DEADLINE_S,
        "the probe after the Xid",
    )


def test_a_lost_card_latches_and_a_restarted_fleetd_keeps_latch_and_decisions(
    rig: Fleetd, tmp_path: Path
) -> None:
    assert rig.post("/api/v1/sim/card/1", {"lost": True}).status_code == 200
    wait_until(lambda: latched(rig), DEADLINE_S, "the latch for the lost card")
    block = recovery(rig)
    assert "card 1 is lost" in block["reason"]
    assert block["advice"].startswith(WARM)
    before = recovery(rig)
    # fleetd restarts (an upgrade): the latch and the decisions are still there.
    assert rig.stop() == 0
    again = start_fleetd(tmp_path, rig.state_dir, config=fast_config(tmp_path), port=rig.port)
    try:
        after = recovery(again)
        assert after["reboot_required"] is True
        assert after["reason"] == before["reason"]
        assert after["since"] == before["since"]
        assert before["decisions"][0] in after["decisions"]
        assert serving(again)["state"] == "stopped"
        assert "not autostarting the engine: reboot required: card 1 is lost" in again.log()
    finally:
        stop_all([again])


@pytest.fixture(scope="module")
def power_cycle_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A power-cycle command that records each run: under --simulate it must never run."""
    tmp = tmp_path_factory.mktemp("power-cycle")
    record = tmp / "ran"
    record.write_text("")
    script = tmp / "rig-power-cycle"
    script.write_text(f'#!/bin/sh\necho "$0 $*" >> {record}\n')
    script.chmod(0o755)
    return record


@pytest.fixture(scope="module")
def phone() -> Iterator[WebhookReceiver]:
    """The webhook the rebooter's alerts go to (what an owner's phone would hear)."""
    server = WebhookReceiver().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def rebooter(
    tmp_path_factory: pytest.TempPathFactory, power_cycle_record: Path, phone: WebhookReceiver
) -> Iterator[Fleetd]:
    """A rig whose reboot command is a marker a test can look for in the audit trail."""
    tmp = tmp_path_factory.mktemp("reboot")
    cycle = power_cycle_record.with_name("rig-power-cycle")
    config = fast_config(
        tmp,
        '\nreboot_command = ["/usr/sbin/rig-reboot", "--now"]\n'
        f'power_cycle_command = ["{cycle}", "--now"]\n',
    )
    with config.open("a") as text:
        text.write(
            "[alerts]\nretry_min_s = 0.05\nretry_max_s = 0.2\n"
            f'[[alerts.webhooks]]\nurl = "{phone.url}/json"\nformat = "json"\n'
        )
    daemon = start_fleetd(tmp, tmp / "state", config=config)
    wait_until(lambda: serving(daemon)["state"] == "ready", 30, "engine ready")
    yield daemon
    stop_all([daemon])


def test_reboot_without_confirm_only_explains(rebooter: Fleetd) -> None:
    pid = serving(rebooter)["pid"]
    shown = fleetctl(rebooter, "reboot")
    assert shown.returncode == 0, shown.stderr
    assert "stops the engine cleanly" in shown.stdout
    assert "/usr/sbin/rig-reboot --now" in shown.stdout
    assert serving(rebooter)["pid"] == pid
    assert (
        rebooter.post("/api/v1/recovery/reboot", {"confirm": True}, token=None).status_code == 401
    )


def test_a_confirmed_reboot_stops_cleanly_then_reboots_the_simulated_host(
    rebooter: Fleetd,
) -> None:
    inject(rebooter, 1, 79)
    wait_until(lambda: latched(rebooter), DEADLINE_S, "the latch")
    wait_until(lambda: serving(rebooter)["state"] == "stopped", DEADLINE_S, "engine stopped")
    boot_before = status(rebooter)["rig"]["boot_id"]
    done = fleetctl(rebooter, "reboot", "--confirm", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["done"] is True
    assert "a real rig would have run: /usr/sbin/rig-reboot --now" in answer["message"]
    # The bring-up: latch cleared, caps re-applied, checks and probe run, engine started.
    wait_until(
        lambda: (
            (recovery(rebooter).get("bring_up") or {}).get("boot_id") not in (None, boot_before)
        ),
        DEADLINE_S,
        "the bring-up",
    )
    block = recovery(rebooter)
    assert block["reboot_required"] is False
    summary = block["bring_up"]["summary"]
    assert "latch cleared" in summary and "CUDA probe passed" in summary, summary
    assert "power cap 180 W re-applied" in summary
    assert block["bring_up"]["engine_started"] is True, summary
    wait_until(lambda: serving(rebooter)["state"] == "ready", 30, "engine ready again")
    cards = status(rebooter)["cards"]
    assert {c["power_limit_w"] for c in cards} == {180}
    found = actions(rebooter)
    assert found.index("bring_up") < found.index("reboot") < found.index("stop_and_latch")
    reboot_row = next(d for d in recovery(rebooter)["decisions"] if d["action"] == "reboot")
    assert reboot_row["actor"] == "api"  # fleetctl goes through the API
    assert "/usr/sbin/rig-reboot --now" in reboot_row["outcome"]


def test_the_simulated_reboot_ends_the_engine_and_the_bring_up_starts_a_new_one(
    rebooter: Fleetd,
) -> None:
    wait_until(lambda: serving(rebooter)["state"] == "ready", 30, "engine ready")
    old_pid = serving(rebooter)["pid"]
    restarts = serving(rebooter)["restarts"]
    assert rebooter.post("/api/v1/sim/reboot").status_code == 200
    wait_until(
        lambda: serving(rebooter)["state"] == "ready" and serving(rebooter)["pid"] != old_pid,
        30,
        "a new engine after the reboot",
    )
    assert serving(rebooter)["restarts"] == restarts, "a reboot's end is no crash to count"
    assert recovery(rebooter)["bring_up"]["engine_started"] is True


def test_a_card_that_faults_again_after_the_warm_reboot_needs_a_cold_power_cycle(
    rebooter: Fleetd, power_cycle_record: Path, phone: WebhookReceiver
) -> None:
    """Xid 31 on card 1, a warm reboot, Xid 31 on card 1 again: a cold power cycle, with the
    history in the reason; the confirmed power cycle under --simulate runs no host command."""
    wait_until(lambda: serving(rebooter)["state"] == "ready", 30, "engine ready")
    inject(rebooter, 1, 31)
    wait_until(lambda: latched(rebooter), DEADLINE_S, "the first latch")
    assert recovery(rebooter)["advice_kind"] == "warm_reboot"
    boot_before = status(rebooter)["rig"]["boot_id"]
    assert fleetctl(rebooter, "reboot", "--confirm").returncode == 0
    wait_until(
        lambda: (
            (recovery(rebooter).get("bring_up") or {}).get("boot_id") not in (None, boot_before)
        ),
        DEADLINE_S,
        "the bring-up",
    )
    inject(rebooter, 1, 31)
    wait_until(lambda: latched(rebooter), DEADLINE_S, "the second latch")
    block = recovery(rebooter)
    assert block["advice_kind"] == "cold_power_cycle"
    assert block["advice"].startswith(COLD)
    # The fault's short name as the policy named it (no card: the sentence names it).
    assert (
        "card 1 had a hardware fault the boot before this one (Xid 31 (MMU page fault), at "
        in block["reason"]
    )
    assert "the warm reboot at" in block["reason"] and "did not help" in block["reason"]
    assert "fleetctl reboot --confirm --cold" in block["way_out"]
    # Every surface takes the latch's rung: the check's fix line, the dry run, a warm confirm.
    wait_until(lambda: xid_result(rebooter, 1), DEADLINE_S, "the Xid in the check")
    xid_check = xid_result(rebooter, 1)
    assert xid_check is not None
    assert "fleetctl reboot --confirm --cold" in xid_check["remedy"], xid_check
    dry = fleetctl(rebooter, "reboot")
    assert dry.returncode == 0 and "fleetctl reboot --confirm --cold" in dry.stdout
    assert "`fleetctl reboot --confirm --cold`" in dry.stdout.splitlines()[-1]
    warm = fleetctl(rebooter, "reboot", "--confirm")
    assert warm.returncode == 4 and "more than a warm reboot" in warm.stderr, warm.stderr
    assert "--force" in warm.stderr
    # The phone hears the escalation: a notification with the cold power cycle's advice.
    phone.wait_for(
        lambda rs: any(
            r.json()["name"] == "RebootRequired"
            and r.json()["status"] == "firing"
            and r.json()["advice"].startswith("Power the rig off for about 30 s")
            for r in rs
        ),
        DEADLINE_S,
        "the cold power cycle's notification",
    )
    stored = rebooter.get("/api/v1/alerts").json()["alerts"]
    latch_alert = next(a for a in stored if a["fingerprint"] == "reboot_required")
    assert latch_alert["advice"].startswith("Power the rig off for about 30 s")
    refused = fleetctl(rebooter, "start")
    assert refused.returncode == 4 and "--cold" in refused.stderr
    explained = fleetctl(rebooter, "reboot", "--cold")
    assert explained.returncode == 0 and "rig-power-cycle --now" in explained.stdout
    boot_before = status(rebooter)["rig"]["boot_id"]
    done = fleetctl(rebooter, "reboot", "--confirm", "--cold", "--json")
    assert done.returncode == 0, done.stderr
    message = json.loads(done.stdout)["message"]
    assert "simulated power cycle" in message and "rig-power-cycle --now" in message
    assert power_cycle_record.read_text() == "", "a host command ran under --simulate"
    row = next(d for d in recovery(rebooter)["decisions"] if d["action"] == "power_cycle")
    assert (
        "a real rig would have run" in row["outcome"] and "rig-power-cycle --now" in row["outcome"]
    )
    wait_until(
        lambda: (
            (recovery(rebooter).get("bring_up") or {}).get("boot_id") not in (None, boot_before)
        ),
        DEADLINE_S,
        "the bring-up after the power cycle",
    )
    assert not latched(rebooter)
    # The same card again after the cold power cycle: the next rung names it, never warm.
    inject(rebooter, 1, 31)
    wait_until(lambda: latched(rebooter), DEADLINE_S, "the third latch")
    block = recovery(rebooter)
    assert block["advice_kind"] == "take_card_out"
    assert block["advice"].startswith("take card 1 out"), block["advice"]
    assert "faulted again after 1 warm reboot and 1 cold power cycle" in block["reason"]
    wait_until(lambda: xid_result(rebooter, 1), DEADLINE_S, "the Xid in the check")
    xid_check = xid_result(rebooter, 1)
    assert xid_check is not None
    assert xid_check["remedy"].startswith("take card 1 out"), xid_check
    phone.wait_for(
        lambda rs: any(
            r.json()["name"] == "RebootRequired"
            and r.json()["status"] == "firing"
            and r.json()["advice"].startswith("Take card 1 out")
            for r in rs
        ),
        DEADLINE_S,
        "the next rung's notification",
    )


def test_repeated_crashes_are_restarted_then_held(tmp_path: Path) -> None:
    scenario = healthy_with_engine(
        tmp_path / "crashy.toml", "\n[engine]\nready_after_s = 0.3\ncrash_after_s = 0.5\n"
    )
    config = fast_config(tmp_path, "breaker_max_restarts = 2\n")
    daemon = start_fleetd(tmp_path, tmp_path / "state", simulate=str(scenario), config=config)
    try:
        wait_until(lambda: serving(daemon)["state"] == "held", 60, "the breaker's hold")
        assert serving(daemon)["restarts"] == 2
        found = actions(daemon)
        assert found.count("restart_after") >= 2 and found[0] == "hold", found
        assert not latched(daemon), "a crash on a healthy rig is no hardware fault"
    finally:
        stop_all([daemon])


def test_a_hardware_xid_during_the_backoff_cancels_the_restart(tmp_path: Path) -> None:
    """An Xid 31 often kills the engine a moment before its line is read: no restart then."""
    scenario = healthy_with_engine(
        tmp_path / "crash-once.toml", "\n[engine]\nready_after_s = 0.3\ncrash_after_s = 1.0\n"
    )
    config = tmp_path / "fleet.toml"
    config.write_text("[serving]\nprobe_interval_s = 0.3\n[recovery]\nbackoff_base_s = 30\n")
    daemon = start_fleetd(tmp_path, tmp_path / "state", simulate=str(scenario), config=config)
    try:
        wait_until(lambda: serving(daemon)["state"] == "backoff", 30, "the backoff after a crash")
        inject(daemon, 1, 31)
        wait_until(lambda: latched(daemon), DEADLINE_S, "the latch")
        wait_until(lambda: serving(daemon)["state"] == "stopped", DEADLINE_S, "engine stopped")
        doc = serving(daemon)
        assert doc["restarts"] == 0 and doc["pid"] is None
        assert "Xid 31 (MMU page fault) on card 1" in doc["reason"]
        assert doc.get("backoff_remaining_s") is None
    finally:
        stop_all([daemon])


def test_dry_run_records_decisions_and_stops_nothing(tmp_path: Path) -> None:
    config = fast_config(tmp_path, "dry_run = true\n")
    daemon = start_fleetd(tmp_path, tmp_path / "state", config=config)
    try:
        wait_until(lambda: serving(daemon)["state"] == "ready", 30, "engine ready")
        pid = serving(daemon)["pid"]
        inject(daemon, 1, 31)
        wait_until(lambda: "stop_and_latch" in actions(daemon), DEADLINE_S, "the decision")
        decision = next(d for d in recovery(daemon)["decisions"] if d["action"] == "stop_and_latch")
        assert decision["dry_run"] is True
        assert "not carried out" in decision["outcome"]
        assert not latched(daemon)
        assert serving(daemon)["state"] == "ready" and serving(daemon)["pid"] == pid
        assert recovery(daemon)["dry_run"] is True
    finally:
        stop_all([daemon])


def test_a_wedged_card_fails_the_probe_and_the_engine_never_starts(tmp_path: Path) -> None:
    daemon = start_fleetd(
        tmp_path, tmp_path / "state", simulate="cuda-wedge", config=fast_config(tmp_path)
    )
    try:
        wait_until(lambda: latched(daemon), DEADLINE_S, "the latch after the failed probe")
        block = recovery(daemon)
        assert "CUDA probe failed on card 1" in block["reason"]
        assert "CUDA_ERROR_DEVICE_UNAVAILABLE" in block["reason"]
        assert block["advice"].startswith(WARM)
        assert serving(daemon)["state"] == "stopped" and serving(daemon)["pid"] is None
        probes = [d for d in block["decisions"] if d["action"] == "probe"]
        assert probes and "card 1 failed" in probes[0]["outcome"]
    finally:
        stop_all([daemon])


def test_the_override_overrides_and_a_new_xid_latches_again(tmp_path: Path) -> None:
    """Under --simulate xid31: latch, clear with a reason, start (exit 0); a second Xid 31
    latches again. The first Xid stays counted, shown cleared."""
    scenario = sooner(tmp_path, "xid31")  # the scenario's Xid 31 at 2 s rather than 20 s
    daemon = start_fleetd(
        tmp_path, tmp_path / "state", simulate=str(scenario), config=fast_config(tmp_path)
    )
    try:
        wait_until(lambda: latched(daemon), 60, "the latch of the scenario's Xid 31")
        wait_until(lambda: serving(daemon)["state"] == "stopped", DEADLINE_S, "engine stopped")
        refused = fleetctl(daemon, "start")
        assert refused.returncode == 4
        assert "clear-reboot-latch --reason" in refused.stderr  # the other way out, said
        clear(daemon, "test")
        started = fleetctl(daemon, "start")
        assert started.returncode == 0, started.stderr
        assert serving(daemon)["state"] == "ready"
        xid_check = next(
            c for c in status(daemon)["checks"] if c["id"] == "xid_since_boot" and c["card"] == 1
        )
        assert xid_check["severity"] == "warning"
        assert "cleared by 'test'" in xid_check["message"]
        assert status(daemon)["cards"][1]["xid_since_boot"] == 1
        inject(daemon, 1, 31)
        wait_until(lambda: latched(daemon), DEADLINE_S, "the latch of the second Xid 31")
        wait_until(lambda: serving(daemon)["state"] == "stopped", DEADLINE_S, "engine stopped")
        assert fleetctl(daemon, "start").returncode == 4
    finally:
        stop_all([daemon])
