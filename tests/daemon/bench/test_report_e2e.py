"""``fleetctl report``: one self-contained HTML file that renders in Chromium and holds no secret.

A real fleetd with a recipe holding a token in its environment, one small bench run, then the
report: opened from disk in headless Chromium (a screenshot kept), every request it makes
recorded (only the file itself: no external asset), and the file searched for the secret,
fleetd's API token and the host name.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from daemon.statedir import StateDir
from tests.support.cli import run_fleetctl_here
from tests.support.external import require_program
from tests.support.fleetd import Fleetd, start_fleetd, stop_all
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.external, pytest.mark.slow(seconds=15)]

SECRET = "hf_reportsecret_4f9a2c7e1b3d5a6c8e0f"
CONFIG = f"""
[serving]
stop_timeout_s = 5
[serving.recipe]
preset = "sim-engine"
[serving.recipe.env]
HF_TOKEN = "{SECRET}"
"""
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("report")
    config = tmp / "fleet.toml"
    config.write_text(CONFIG)
    daemon = start_fleetd(tmp, tmp / "state", config=config)
    try:
        wait_until(
            lambda: daemon.get("/api/v1/status").json()["serving"]["state"] == "ready",
            30,
            "the simulated engine ready",
        )
        yield daemon
    finally:
        stop_all([daemon])


def _fleetctl(daemon: Fleetd, *args: str) -> tuple[int, str, str]:
    token = str(StateDir(daemon.state_dir).token)
    done = run_fleetctl_here("--url", daemon.url, "--token-file", token, *args)
    return done.returncode, done.stdout, done.stderr


def test_report_renders_in_chromium_with_no_secret_and_no_host_name(
    rig: Fleetd, tmp_path: Path
) -> None:
    code, _, err = _fleetctl(
        rig,
        *("bench", "--concurrency", "1,2", "--depths", "1k", "--temperatures", "0"),
        *("--output-tokens", "8"),
    )
    assert code == 0, err
    report = tmp_path / "report.html"
    code, out, err = _fleetctl(rig, "report", "--output", str(report))
    assert code == 0, err
    assert str(report) in out
    text = report.read_text()
    assert SECRET not in text
    assert rig.token not in text
    host = re.compile(rf"(?<![\w-]){re.escape(socket.gethostname())}(?![\w-])")
    assert not host.search(text), "the host name is in the report"
    assert "HF_TOKEN=&#x27;***&#x27;" in text  # named, its value masked
    for section in ("Hardware", "Recipe (masked) and build", "Canaries", "Memory test", "Bench"):
        assert section in text, section
    assert "<script" not in text.lower()

    code, out, err = _fleetctl(rig, "report", "--json")
    assert code == 0, err
    document = json.loads(out)
    assert document["bench"][0]["cells"], "the bench run is in the report"
    assert document["recipe"]["spec"]["recipe_hash"]
    assert document["hardware"]["cards"][0]["vbios_version"]
    assert SECRET not in out
    assert "hostname" not in document and not host.search(out)
    code, out, err = _fleetctl(rig, "report", "--json", "--with-hostname")
    assert code == 0, err
    assert json.loads(out)["hostname"] == socket.gethostname()

    chromium = require_program("chromium", "chromium")  # installs it as root; fails under CI
    requests: list[str] = []
    artifacts = os.environ.get("CMPFLEET_TEST_ARTIFACTS")
    shot = (Path(artifacts) if artifacts else tmp_path) / "report.png"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("request", lambda request: requests.append(request.url))
            page.goto(report.as_uri())
            assert page.title().startswith("cmpfleet confirmation report")
            assert page.locator("h2").count() >= 5
            assert page.locator("svg").count() >= 1  # throughput against concurrency
            assert page.locator("table").count() >= 4
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000
    assert requests == [report.as_uri()], f"the report loaded more than itself: {requests}"


def test_dashboard_draws_the_last_run_beside_the_reference(rig: Fleetd, tmp_path: Path) -> None:
    if not rig.get("/api/v1/bench").json()["runs"]:
        code, _, err = _fleetctl(
            rig,
            *("bench", "--concurrency", "1,2", "--depths", "1k", "--temperatures", "0"),
            *("--output-tokens", "8"),
        )
        assert code == 0, err
    chromium = require_program("chromium", "chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(rig.url + "/")
            page.wait_for_selector("#bench:not([hidden])", timeout=15_000)
            chart = page.locator("#bench-concurrency")
            assert chart.get_attribute("data-points") == "2"  # 1 and 2 streams
            assert chart.locator("canvas").count() == 1  # uPlot drew it
            assert "reference" in chart.locator(".u-legend").inner_text()  # beside the reference
            assert "run " in page.locator("#bench-summary").inner_text()
            page.locator("#bench").screenshot(path=str(tmp_path / "bench-panel.png"))
        finally:
            browser.close()
