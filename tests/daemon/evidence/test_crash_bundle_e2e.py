"""The crash black box end to end: a real fleetd on ``depth-crash`` and its real engine.

A request past 134k tokens kills the simulated engine on PP rank 3 with an Xid 31 on card
3; fleetd latches, stops it and writes one bundle holding every part; ``crash show`` gives
the row-chunk verdict naming the depth and the rank in 80 columns; ``crash export`` holds
no secret of the recipe's flags or env (an API key, an HF token) and no host name unless
asked; the webhook carries the verdict and the bundle id; ``/metrics`` counts it. Then a
full disk under the bundles (a real tmpfs, filled): the next Xid still latches and stops
the engine, and the status says the evidence could not be written.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import socket
import stat
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import loopback
from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, latch_by_xid, start_fleetd, stop_all, wait_until
from tests.support.webhook import WebhookReceiver

API_KEY = "sk-CRASHKEY-A7"
HF_TOKEN = "hf_CRASHTOKEN-H3"
DEPTH_CHARS = 4 * 140_000  # the simulated engine counts characters / 4


def config_text(receiver: WebhookReceiver) -> str:
    return f"""
[serving]
probe_interval_s = 0.3

[serving.recipe]
preset = "sim-engine"
extra_args = [
    "--api-key", "{API_KEY}", "--sim-ready-after-s", "0.3",
    "--sim-crash-at-depth-tokens", "134000",
]

[serving.recipe.env]
HF_TOKEN = "{HF_TOKEN}"
DSV4_LOGITS_ROW_CHUNK = "0"

[serving.recipe.lint.waive]
row-chunk-unset = "the depth-crash test runs without the row chunk on purpose"

[alerts]
retry_min_s = 0.05
retry_max_s = 0.2
group_window_s = 0

[[alerts.webhooks]]
url = "{receiver.url}/hook"
min_severity = "info"
"""


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, receiver: WebhookReceiver) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("crash")
    config = tmp / "fleet.toml"
    config.write_text(config_text(receiver))
    started = start_fleetd(tmp, tmp / "state", simulate="depth-crash", config=config)
    try:
        yield started
    finally:
        stop_all([started])


def status(daemon: Fleetd) -> dict[str, Any]:
    document: dict[str, Any] = daemon.get("/api/v1/status").json()
    return document


def crashes(daemon: Fleetd) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = daemon.get("/api/v1/crashes").json()["crashes"]
    return found


@pytest.fixture(scope="module")
def crashed(daemon: Fleetd) -> dict[str, Any]:
    """A request past the depth; the bundle fleetd wrote (its summary)."""
    wait_until(lambda: status(daemon)["serving"]["state"] == "ready", 60, "the engine ready")
    wait_until(lambda: daemon.get("/api/v1/builds").json()["builds"], 60, "the build captured")
    # The bundle keeps the engine's figures as the last poll saw them: wait for a scrape,
    # then for two polls (the second begun after the scrape) so the black box holds it.
    wait_until(lambda: status(daemon)["serving"]["metrics"], 30, "the engine's first scrape")
    polls = status(daemon)["rig"]["polls"]
    wait_until(lambda: status(daemon)["rig"]["polls"] >= polls + 2, 30, "two polls more")
    url = status(daemon)["serving"]["url"]
    body = {"model": "dsv4s", "messages": [{"role": "user", "content": "x" * DEPTH_CHARS}]}
    with contextlib.suppress(httpx.HTTPError):  # its worker died: no answer comes
        loopback.post(
            f"{url}/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {API_KEY}"},
            timeout=30,
        )
    wait_until(lambda: crashes(daemon), 60, "the crash bundle")
    wait_until(lambda: status(daemon)["recovery"]["reboot_required"], 30, "the latch")
    [summary] = crashes(daemon)
    return summary


def test_the_bundle_holds_every_part_private(daemon: Fleetd, crashed: dict[str, Any]) -> None:
    root = daemon.state_dir / "crashes" / crashed["id"]
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    names = {path.name for path in root.iterdir()}
    assert names == {
        "summary.json",
        "cards.json",
        "kernel.json",
        "inflight.json",
        "launch.json",
        "engine.json",
        "fingerprint.json",
        "engine.log",
    }
    for path in root.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    parts = daemon.get(f"/api/v1/crashes/{crashed['id']}").json()["parts"]
    assert parts["cards"]["read"] == "fresh"  # NVML read right after the stop
    assert len(parts["cards"]["cards"]) == 4 and parts["cards"]["samples"]
    assert parts["cards"]["cards"][3]["memory_total_mib"] == 65536
    records = parts["kernel"]["records"]
    [record] = [r for r in records if r.get("xid") == 31]
    assert record["seq"] is not None and record["card"] == 3
    # The driver's other lines of this boot's ring, with their sequence numbers too.
    assert any("NVRM: loading NVIDIA" in r["text"] and r["seq"] is not None for r in records)
    assert parts["inflight"]["requests"][0]["depth_tokens"] == 140_000
    assert "x" * 100 not in json.dumps(parts)  # no prompt text
    assert parts["launch"]["recipe_hash"] == parts["launch"]["build"]["recipe_hash"]
    assert parts["launch"]["launch"]["argv"]
    assert parts["engine"]["metrics"] is not None
    assert parts["fingerprint"]["kv_tokens"] > 0


def test_crash_show_gives_the_row_chunk_verdict_with_depth_and_rank(
    daemon: Fleetd, crashed: dict[str, Any]
) -> None:
    assert crashed["verdict"]["rule"] == "row_chunk_unset"
    shown = run_fleetctl_here("--url", daemon.url, "crash", "show", crashed["id"])
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    text = shown.stdout
    assert "row_chunk_unset (high confidence)" in text
    assert "140,000 tokens" in text and "PP rank 3" in text
    assert "DSV4_LOGITS_ROW_CHUNK=64" in text
    listed = run_fleetctl_here("--url", daemon.url, "crashes")
    assert listed.returncode == 0 and crashed["id"] in listed.stdout
    assert "row_chunk_unset" in listed.stdout and "140,000" in listed.stdout
    bad = run_fleetctl_here("--url", daemon.url, "crash", "show", "../etc")
    assert bad.returncode == 2 and "is not a crash bundle id" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_the_export_holds_no_secret_and_no_host_name(
    daemon: Fleetd, crashed: dict[str, Any], tmp_path: Path
) -> None:
    raw = (daemon.state_dir / "engine.log").read_text()
    assert API_KEY in raw and HF_TOKEN in raw  # the engine really printed them
    host = socket.gethostname()
    out = tmp_path / "crash.tar.gz"
    done = run_fleetctl_here(
        "--url", daemon.url, "crash", "export", crashed["id"], "--output", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    blob = "\n".join(_members(out.read_bytes()).values())
    assert API_KEY not in blob and HF_TOKEN not in blob
    assert not re.search(rf"\b{re.escape(host)}\b", blob)
    assert "x" * 100 not in blob
    kept = tmp_path / "with-host.tar.gz"
    done = run_fleetctl_here(
        "--url", daemon.url, "crash", "export", crashed["id"], "-o", str(kept), "--with-hostname"
    )
    assert done.returncode == 0, done.stderr
    with_host = "\n".join(_members(kept.read_bytes()).values())
    assert re.search(rf"\b{re.escape(host)}\b", with_host)
    assert API_KEY not in with_host and HF_TOKEN not in with_host


def test_the_webhook_and_metrics_carry_the_verdict(
    daemon: Fleetd, crashed: dict[str, Any], receiver: WebhookReceiver
) -> None:
    bundle_id = crashed["id"]
    receiver.wait_for(
        lambda got: any(bundle_id.encode() in r.body and b"EngineCrash" in r.body for r in got),
        30,
        "the crash notification",
    )
    [note] = [r for r in receiver.requests if bundle_id.encode() in r.body]
    assert b"row_chunk_unset" in note.body
    # The class label is the bundle's crash class, else its fault: the engine's own crash
    # (``cuda_fault``) when its exit came inside the bundle's gathering window, else the
    # Xid's ``illegal_memory_access`` (both happen: the worker dies a moment after its Xid).
    shown = crashed.get("crash_class") or crashed.get("fault")
    assert shown in ("cuda_fault", "illegal_memory_access"), crashed
    metrics = daemon.get("/metrics").text
    assert f'cmpfleet_crashes{{class="{shown}",verdict="row_chunk_unset"}} 1.0' in metrics, [
        line for line in metrics.splitlines() if line.startswith("cmpfleet_crashes")
    ]


def test_a_full_disk_under_the_bundles_never_holds_recovery_back(
    daemon: Fleetd, crashed: dict[str, Any], tmp_path: Path
) -> None:
    assert daemon.post("/api/v1/sim/reboot").status_code == 200
    wait_until(lambda: not status(daemon)["recovery"]["reboot_required"], 60, "the reboot")
    wait_until(lambda: status(daemon)["serving"]["state"] == "ready", 60, "the engine again")
    with _full_tmpfs(daemon.state_dir / "crashes"):
        latch_by_xid(daemon, card=1, xid=79)
        wait_until(
            lambda: status(daemon)["serving"]["state"] == "stopped", 60, "the engine stopped"
        )
        wait_until(
            lambda: (status(daemon)["recovery"].get("evidence") or {}).get("degraded"),
            30,
            "the status saying so",
        )
        degraded = status(daemon)["recovery"]["evidence"]["degraded"]
        assert degraded.startswith("crash evidence could not be written")
        shown = run_fleetctl_here("--url", daemon.url, "status")
        assert "EVIDENCE LOST" in shown.stdout


@contextlib.contextmanager
def _full_tmpfs(directory: Path) -> Iterator[None]:
    """A small real tmpfs over ``directory``, filled up (root only: else the test skips)."""
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        with contextlib.suppress(OSError), (directory / "filler").open("wb") as out:
            while True:
                out.write(b"\0" * 4096)
                out.flush()
        yield
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def _members(data: bytes) -> dict[str, str]:
    found: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            handle = tar.extractfile(member)
            assert handle is not None
            found[member.name] = handle.read().decode()
    return found
