"""The dashboard in a real browser: Playwright drives Debian's Chromium against a real
simulated fleetd on loopback (one browser and one daemon for the whole module).

Screenshots (desktop 1280x800 and phone 390x844, healthy and under the reboot latch; an 8-card
braked rig at 1366x768 and 390x844) land in
``$CMPFLEET_TEST_ARTIFACTS/dashboard`` when that is set (CI keeps them), else in the pytest
temp dir; the module prints where (``pytest -s`` or ``-rP`` shows it).
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    Dialog,
    FloatRect,
    Locator,
    Page,
    Playwright,
    Route,
    expect,
    sync_playwright,
)
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.support import loopback
from tests.support.external import require_program
from tests.support.fleetd import Fleetd, free_port, start_fleetd, stop_all, wait_until
from tests.support.waiting import DEADLINE_SCALE

pytestmark = [pytest.mark.external, pytest.mark.slow(seconds=80)]

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DESKTOP = {"width": 1280, "height": 800}
LAPTOP = {"width": 1366, "height": 768}
PHONE = {"width": 390, "height": 844}
# The page polls every 2 s: anything it shows must show within 5 s on a quiet machine, within
# the suite's deadline scale of that on a loaded one (a 24 h history answer took over 5 s
# at load 10); Playwright's own assertions get the same.
FAST_S = 5 * DEADLINE_SCALE
expect.set_options(timeout=FAST_S * 1000)
REBOOT_COMMAND = "/usr/sbin/rig-reboot --now"  # recorded, never run under --simulate
RIG_NAME = "rig-dash-07"
ONE_TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\+05:30"  # the page's one format, in Kolkata
RIG_CONFIG = f"""
[rig]
name = "{RIG_NAME}"
[serving]
stop_timeout_s = 5
metrics_interval_s = 0.5
profile = "default"
[serving.profiles.small]
preset = "sim-engine"
served_model_name = "dsv4s-small"
gpus = "0,1,2,3"
[recovery]
reboot_command = ["/usr/sbin/rig-reboot", "--now"]
[guard]
listen = "127.0.0.1:0"
"""


@dataclass
class Rig:
    """The module's daemon (replaced when a test restarts it) and where output goes."""

    tmp: Path
    daemon: Fleetd
    config: Path
    shots: Path
    requests: list[str] = field(default_factory=list)  # every URL any page asked for

    def status(self) -> dict[str, Any]:
        answer = self.daemon.get("/api/v1/status")
        assert answer.status_code == 200, answer.text
        return dict(answer.json())


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("dashboard")
    config = tmp / "fleet.toml"
    config.write_text(RIG_CONFIG)
    daemon = start_fleetd(tmp, tmp / "state", config=config)
    artifacts = os.environ.get("CMPFLEET_TEST_ARTIFACTS")
    if artifacts:
        shots = Path(artifacts) / "dashboard"
        shots.mkdir(parents=True, exist_ok=True)
    else:
        shots = tmp_path_factory.mktemp("dashboard-screenshots")
    print(f"dashboard screenshots: {shots}")
    holder = Rig(tmp=tmp, daemon=daemon, config=config, shots=shots)
    try:
        wait_until(
            lambda: holder.status()["serving"]["state"] == "ready", 30, "the simulated engine"
        )
        yield holder
    finally:
        stop_all([holder.daemon])


@pytest.fixture(scope="module")
def browser(rig: Rig) -> Iterator[Browser]:
    chromium = require_program("chromium", "chromium")  # installs it as root; fails under CI
    with sync_playwright() as playwright:
        launched = _launch(playwright, chromium)
        try:
            yield launched
        finally:
            launched.close()


def _launch(playwright: Playwright, chromium: str) -> Browser:
    return playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)


def _context(
    browser: Browser, rig: Rig, viewport: dict[str, int], timezone_id: str | None = None
) -> BrowserContext:
    """A fresh browser profile that records every request and lets none leave loopback."""
    context = browser.new_context(viewport=viewport, timezone_id=timezone_id)  # type: ignore[arg-type]
    context.set_default_timeout(FAST_S * 1000)
    context.on("request", lambda request: rig.requests.append(request.url))
    return context


@pytest.fixture
def page(browser: Browser, rig: Rig) -> Iterator[Page]:
    context = _context(browser, rig, DESKTOP)
    try:
        yield context.new_page()
    finally:
        context.close()


def open_dashboard(page: Page, rig: Rig) -> None:
    page.goto(rig.daemon.url + "/")
    expect(page.locator("#verdict")).not_to_have_attribute("data-overall", "unknown")


def enter_token(page: Page, rig: Rig) -> None:
    """Type the token once, as a person would; the page keeps it in localStorage."""
    if page.locator("#token-form").is_hidden():
        page.click("#token-button")
    page.fill("#token-input", rig.daemon.token)
    page.click("#token-form button[type=submit]")
    expect(page.locator("#token-form")).to_be_hidden()


# How many of a chart canvas's pixels along one row (or column) are exactly this colour
# (within antialiasing's reach): a limit line or a marker really painted, not only planned.
PAINTED = """([id, rgb, row, col]) => {
  const canvas = document.querySelector(`#${id} canvas`);
  const ctx = canvas.getContext("2d");
  const px = row === null
    ? ctx.getImageData(col, 0, 1, canvas.height).data
    : ctx.getImageData(0, row, canvas.width, 1).data;
  let hits = 0;
  for (let i = 0; i < px.length; i += 4) {
    if ([0, 1, 2].every((c) => Math.abs(px[i + c] - rgb[c]) <= 8)) hits += 1;
  }
  return { hits, width: canvas.width, height: canvas.height };
}"""
CAP_RGB = (0xE6, 0xE9, 0xEE)  # chartmarks.js LIMIT_COLOURS.cap
CRIT_RGB = (0xFF, 0x33, 0x55)  # LIMIT_COLOURS.crit, and MARKER_COLOURS.xid
REBOOT_RGB = (0x8C, 0xC4, 0xFF)  # MARKER_COLOURS.reboot


def painted_row(page: Page, chart: str, rgb: tuple[int, int, int], row: int) -> float:
    """The share of the canvas's width painted ``rgb`` along canvas row ``row``."""
    found = page.evaluate(PAINTED, [chart, list(rgb), row, None])
    return float(found["hits"]) / float(found["width"])


def painted_column(page: Page, chart: str, rgb: tuple[int, int, int], col: int) -> float:
    """The share of the canvas's height painted ``rgb`` along canvas column ``col``."""
    found = page.evaluate(PAINTED, [chart, list(rgb), None, col])
    return float(found["hits"]) / float(found["height"])


def marker_column(page: Page, chart: str, kind: str) -> int:
    """The canvas column where the chart drew its newest ``kind`` marker (waits for one)."""
    box = page.locator(f"#{chart}")
    expect(box).to_have_attribute("data-marker-cols", re.compile(rf"(^|,){kind}:\d+"))
    cols = box.get_attribute("data-marker-cols") or ""
    return [int(c.split(":")[1]) for c in cols.split(",") if c.startswith(f"{kind}:")][-1]


def box_of(locator: Locator) -> FloatRect:
    """The element's box. The page draws some parts anew on each status it reads: one found,
    then replaced before it was measured, has no box (None), so it is found again."""
    box: FloatRect | None = None

    def measured() -> bool:
        nonlocal box
        box = locator.bounding_box()
        return box is not None

    wait_until(measured, FAST_S / DEADLINE_SCALE, f"a box for {locator}")
    assert box is not None
    return box


def test_banner_tiles_engine_and_charts_show_the_daemons_real_data(page: Page, rig: Rig) -> None:
    open_dashboard(page, rig)
    status = rig.status()
    expect(page.locator("#verdict")).to_have_attribute("data-overall", "ok")
    expect(page.locator("#verdict-word")).to_have_text("OK")
    tiles = page.locator(".tile")
    expect(tiles).to_have_count(4)
    for card in status["cards"]:
        tile = page.locator(f'.tile[data-card="{card["index"]}"]')
        expect(tile).to_contain_text(card["pci_bus_id"])
        expect(tile.locator('[data-badge="vram"]')).to_have_text(
            f"UNLOCKED {card['memory_total_mib']:,} MiB"
        )
        expect(tile.locator('[data-badge="brake"]')).to_have_text("no brake")
        expect(tile.locator('[data-metric="power"]')).to_contain_text(
            f"/ {card['power_limit_w']:g} W"
        )
        pcie = tile.locator('[data-metric="pcie"]')
        expect(pcie.locator(".label")).to_have_text("PCIe · baseline Gen2 x4")
        expect(pcie.locator(".value")).to_have_text(f"Gen{card['pcie_gen']} x{card['pcie_width']}")
        expect(tile.locator('[data-metric="xids"]')).to_contain_text("0")
    expect(page.locator("#engine-facts")).to_have_attribute("data-state", "ready")
    expect(page.locator('[data-fact="restarts"] dd')).to_have_text(
        str(status["serving"]["restarts"])
    )
    expect(page.locator("#check-list")).to_contain_text("every check passes")
    names = [canary["name"] for canary in status["canaries"]]
    expect(page.locator("#canary-list li")).to_have_count(len(names))
    for name in names:
        expect(page.locator(f'#canary-list li[data-canary="{name}"] .name')).to_have_text(name)
    for chart in ("power", "temperature", "clock", "tokens"):
        expect(page.locator(f"#chart-{chart} canvas")).to_have_count(1)
    expect(page.locator("#chart-power")).not_to_have_attribute("data-points", "0")
    assert int(page.get_attribute("#chart-power", "data-points") or 0) > 0
    # A young daemon has a few points: the axis still spans the hour, not years, and
    # fills from the left (the first point is the left edge).
    expect(page.locator("#chart-power")).to_have_attribute("data-span-s", "3600")
    first_s = rig.daemon.get("/api/v1/history?span=1h").json()["ts_s"][0]
    assert abs(int(page.get_attribute("#chart-power", "data-x-min") or 0) - first_s) <= 10
    # The rig's name heads the page and the tab.
    assert status["rig"]["name"] == RIG_NAME
    expect(page.locator("#rig-name")).to_have_text(RIG_NAME)
    expect(page).to_have_title(f"OK - {RIG_NAME} - cmpfleet")
    # The 180 W cap is a line across the power chart (its y range reaches it), and the
    # temperature chart has its warning and critical limits.
    assert status["rig"]["power_cap_w"] == 180
    power = page.locator("#chart-power")
    expect(power).to_have_attribute("data-limit-rows", re.compile(r"^\d+$"))
    cap_row = int(power.get_attribute("data-limit-rows") or 0)
    assert painted_row(page, "chart-power", CAP_RGB, cap_row) > 0.3
    temperature = page.locator("#chart-temperature")
    expect(temperature).to_have_attribute("data-limit-rows", re.compile(r"^\d+,\d+$"))
    crit_row = int((temperature.get_attribute("data-limit-rows") or "0").split(",")[1])
    assert painted_row(page, "chart-temperature", CRIT_RGB, crit_row) > 0.3
    expect(page.locator("#event-list li[data-event]").first).to_be_visible()
    page.screenshot(path=rig.shots / "desktop.png", full_page=True)
    # Live through the daemon's status stream: no status polling beside it.
    assert rig.daemon.url + "/api/v1/stream?interval_s=2" in rig.requests
    assert rig.requests.count(rig.daemon.url + "/api/v1/status") <= 1, rig.requests


def eight_braked_cards(status: dict[str, Any]) -> dict[str, Any]:
    """The module's real status document, as an 8-card rig whose board brakes every slot."""
    first = status["cards"][0]
    message = "HW power brake active with no thermal or power cause in 3 of 3 samples: 88 W"
    remedy = "Kapton tape over PCIe pin B30 on the braked card's slot"
    cards = [
        {**first, "index": n, "pci_bus_id": f"0000:{n + 1:02x}:00.0", "state": "critical",
         "power_brake_active": True, "tags": ["BRAKE"], "in_profile": True}
        for n in range(8)
    ]  # fmt: skip
    checks = [
        {"id": "power_brake", "card": n, "severity": "critical",
         "message": f"card {n}: {message}", "remedy": remedy}
        for n in range(8)
    ]  # fmt: skip
    cause = {
        "id": "power_brake", "severity": "critical", "cards": list(range(8)),
        "where": "cards 0-7", "message": message, "remedy": remedy, "confirmed": True,
        "explained_by": None, "headline": f"power_brake cards 0-7: {message}",
    }  # fmt: skip
    return {**status, "overall": "critical", "cards": cards, "checks": checks, "causes": [cause]}


def test_eight_braked_cards_fit_a_laptop_and_a_phone_with_the_advice_first(
    browser: Browser, rig: Rig
) -> None:
    """1366x768: the cause's advice, all eight cards, the engine and the checks on the first
    screen; 390x844: each card's line says BRAKE, never "ok". Screenshots of both."""
    doc = eight_braked_cards(rig.status())
    for viewport, name in (
        (LAPTOP, "eight-cards-1366x768.png"),
        (PHONE, "eight-cards-390x844.png"),
    ):
        context = _context(browser, rig, viewport)
        try:
            page = context.new_page()
            page.route("**/api/v1/stream*", lambda route: route.fulfill(status=404, body="{}"))
            page.route("**/api/v1/status", lambda route: route.fulfill(json=doc))
            open_dashboard(page, rig)
            expect(page.locator("#verdict-detail")).to_contain_text("power_brake cards 0-7")
            advice = page.locator('#advice .advice-box[data-cause="power_brake"]')
            expect(advice).to_contain_text("Fix: Kapton tape over PCIe pin B30")
            lines = page.locator(".tile .tile-line")
            expect(lines).to_have_count(8)
            for index in range(8):
                line = page.locator(f'.tile[data-card="{index}"] .tile-line')
                expect(line).to_be_visible()
                expect(line.locator('[data-tag="BRAKE"]')).to_be_visible()
                expect(line.locator(".line-flags")).not_to_contain_text("ok")
            height = viewport["height"]
            box = box_of(advice)
            assert box["y"] + box["height"] <= height
            if viewport is LAPTOP:  # the engine and the checks above the fold too
                for section in ("#engine h2", "#checks h2", "#check-list li"):
                    found = box_of(page.locator(section).first)
                    assert found["y"] + found["height"] <= height, section
            page.screenshot(path=rig.shots / name)
        finally:
            context.close()


def two_engines(status: dict[str, Any]) -> dict[str, Any]:
    """The module's real status document as an 8-card rig running two engines, 4+4 cards."""
    first = status["cards"][0]
    cards = [
        {**first, "index": n, "pci_bus_id": f"0000:{n + 1:02x}:00.0", "in_profile": True}
        for n in range(8)
    ]  # fmt: skip
    base = status.get("serving") or {}
    dsv4 = {**base, "profile": "dsv4", "state": "ready", "pid": 4242, "cards": [0, 1, 2, 3],
            "port": 8001, "restarts": 0}  # fmt: skip
    qwen = {**base, "profile": "qwen", "state": "starting", "pid": 4343, "cards": [4, 5, 6, 7],
            "port": 8002, "restarts": 1}  # fmt: skip
    return {**status, "cards": cards, "serving": dsv4, "engines": [dsv4, qwen]}


def test_two_engines_get_a_box_each_and_each_card_names_its_engine(page: Page, rig: Rig) -> None:
    """Issue 42: one engine box per entry of `engines`, titled profile and state; each card's
    line names the engine that runs on it."""
    doc = two_engines(rig.status())
    page.route("**/api/v1/stream*", lambda route: route.fulfill(status=404, body="{}"))
    page.route("**/api/v1/status", lambda route: route.fulfill(json=doc))
    open_dashboard(page, rig)
    expect(page.locator("#engine-title")).to_have_text("Engine dsv4 · ready")
    expect(page.locator('#engine-facts [data-fact="state"] dd')).to_have_text("ready")
    expect(page.locator('#engine-facts [data-fact="cards"] dd')).to_contain_text("0")
    boxes = page.locator("#engine-more .engine-box")
    expect(boxes).to_have_count(1)
    qwen = page.locator('#engine-more .engine-box[data-engine="qwen"]')
    expect(qwen.locator("h3")).to_have_text("Engine qwen · starting")
    expect(qwen.locator('[data-fact="state"] dd')).to_have_text("starting")
    expect(qwen.locator('[data-fact="pid"] dd')).to_have_text("4343")
    expect(page.locator(".tile .tile-line")).to_have_count(8)
    for index in range(8):
        name = "dsv4" if index < 4 else "qwen"
        line = page.locator(f'.tile[data-card="{index}"] .line-card')
        expect(line).to_have_text(f"#{index} {name}")
        expect(line).to_have_attribute("data-engine", name)


def test_a_side_engines_box_has_its_own_buttons_that_name_it(page: Page, rig: Rig) -> None:
    """A side engine's Start/Stop/Restart follow its own state and send its name."""
    with_token(page, rig)
    doc = two_engines(rig.status())
    sent: list[tuple[str, Any]] = []

    def answer(route: Route) -> None:
        sent.append((route.request.url, route.request.post_data_json))
        qwen = {**doc["engines"][1], "state": "stopping"}
        route.fulfill(json={"action": "stop", "accepted": True, "serving": qwen})

    page.route("**/api/v1/stream*", lambda route: route.fulfill(status=404, body="{}"))
    page.route("**/api/v1/status", lambda route: route.fulfill(json=doc))
    page.route("**/api/v1/serving/stop", answer)
    open_dashboard(page, rig)
    qwen = page.locator('#engine-more .engine-box[data-engine="qwen"]')
    start = qwen.locator('[data-engine-action="start"]')
    stop = qwen.locator('[data-engine-action="stop"]')
    expect(start).to_be_disabled()  # qwen is starting; dsv4's Start is its own matter
    expect(start).to_have_attribute("title", "the engine is starting")
    expect(qwen.locator('[data-engine-action="restart"]')).to_be_disabled()
    expect(stop).to_be_enabled()
    asked: list[str] = []

    def accept(dialog: Dialog) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    stop.click()
    expect(page.locator("#engine-result")).to_have_text("stop qwen: accepted, engine stopping")
    assert asked and asked[0].startswith("Stop engine qwen?"), asked
    assert sent == [(rig.daemon.url + "/api/v1/serving/stop", {"engine": "qwen"})]


def test_times_read_alike_everywhere_in_the_browsers_zone(browser: Browser, rig: Rig) -> None:
    """One format (ISO-like, seconds, the zone written out) in the timeline and the charts."""
    context = _context(browser, rig, DESKTOP, timezone_id="Asia/Kolkata")
    try:
        page = context.new_page()
        open_dashboard(page, rig)
        expect(page.locator("#time-zone")).to_have_text("times in UTC+05:30")
        when = page.locator("#event-list li[data-event] .when").first
        expect(when).to_have_text(re.compile(rf"^{ONE_TIME} · "))
        expect(page.locator("#chart-power canvas")).to_have_count(1)
        over = page.locator("#chart-power .u-over")
        legend_time = page.locator("#chart-power .u-legend .u-series").first.locator(".u-value")
        shown = re.compile(rf"^{ONE_TIME}$")
        # A loaded machine draws the chart again after its data come (a new chart, no cursor):
        # the mouse moves over it until the legend shows the time under it, as a person's does.
        moves = iter(range(10**6))

        def legend_shows_a_time() -> bool:
            box = over.bounding_box()
            if box is None:
                return False
            share = 0.55 + 0.1 * (next(moves) % 4)
            over.hover(position={"x": box["width"] * share, "y": box["height"] / 2})
            return bool(shown.match(legend_time.text_content() or ""))

        wait_until(legend_shows_a_time, 20, "the chart legend's time under the mouse")
    finally:
        context.close()


def test_canaries_show_their_verdicts_and_a_failures_advice(page: Page, rig: Rig) -> None:
    open_dashboard(page, rig)
    # The first round runs once the engine is ready; the healthy simulation passes it all.
    for name in ("copy_fidelity", "tool_calls", "reasoning_field", "throughput"):
        row = page.locator(f'#canary-list li[data-canary="{name}"]')
        expect(row).to_have_attribute("data-result", "pass", timeout=30000)
        expect(row.locator(".sev")).to_have_class("sev ok")
        expect(row.locator(".when")).to_contain_text("ago")
        expect(row.locator(".advice")).to_have_count(0)
    expect(page.locator('[data-canary="copy_fidelity"] .figure')).to_have_text("100 %")

    def doctored(route: Route) -> None:
        """The real status, with a canary failing and engine log signatures counted."""
        status = route.fetch().json()
        status["canaries"][0].update(result="fail", figure=0.8, advice="token corruption")
        status["log_signatures"] = [
            {"name": "traceback", "this_hour": 2, "last_24h": 2, "last_seen_hour": None},
            {"name": "out_of_vocab", "this_hour": 0, "last_24h": 1, "last_seen_hour": None},
        ]
        route.fulfill(json=status)

    page.route("**/api/v1/stream*", lambda route: route.fulfill(status=404, body="{}"))
    page.route("**/api/v1/status", doctored)
    open_dashboard(page, rig)
    failing = page.locator('#canary-list li[data-canary="copy_fidelity"]')
    expect(failing).to_have_attribute("data-result", "fail")
    expect(failing.locator(".sev")).to_have_class("sev critical")
    expect(failing.locator(".figure")).to_have_text("80 %")
    expect(failing.locator(".advice")).to_have_text("token corruption")
    expect(page.locator("#log-signatures")).to_have_text("Engine log this hour: traceback 2")
    # The page keeps polling: a handler still fetching when the context closes must not
    # raise into the next test's setup.
    page.unroute_all(behavior="ignoreErrors")


def test_the_traffic_panel_shows_the_agent_sessions_the_guard_saw(page: Page, rig: Rig) -> None:
    wait_until(lambda: rig.status()["serving"]["state"] == "ready", 30, "the engine ready")
    guard = rig.daemon.get("/api/v1/guard").json()["listen"]
    answer = loopback.post(
        f"http://{guard}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "Hello from an agent."}]},
    )
    assert answer.status_code == 200, answer.text
    session = answer.headers["x-cmpfleet-session"]
    wait_until(
        lambda: any(s["id"] == session for s in rig.daemon.get("/api/v1/guard").json()["sessions"]),
        10,
        "the session in fleetd's report",
    )
    open_dashboard(page, rig)
    row = page.locator(f'#traffic-sessions tr[data-session="{session}"]')
    expect(row).to_be_visible()
    expect(row).to_contain_text("anonymous")
    expect(page.locator("#traffic-summary")).to_contain_text(f"guard on {guard}: up")


def test_without_the_stream_the_page_polls(page: Page, rig: Rig) -> None:
    """An older fleetd (or a listener refusing the stream) answers 404: the page polls."""
    page.route("**/api/v1/stream*", lambda route: route.fulfill(status=404, body="{}"))
    open_dashboard(page, rig)
    expect(page.locator(".tile")).to_have_count(4)
    for _ in range(3):  # and keeps polling, every 2 s
        page.wait_for_event(
            "request", lambda r: r.url.endswith("/api/v1/status"), timeout=FAST_S * 1000
        )
    expect(page.locator("#verdict")).to_have_attribute("data-overall", "ok")
    expect(page.locator("#reconnecting")).to_be_hidden()


def test_the_24h_span_draws_from_rollups(page: Page, rig: Rig) -> None:
    open_dashboard(page, rig)
    with page.expect_response(lambda r: "/api/v1/history?span=24h" in r.url) as answer:
        page.click('[data-span="24h"]')
    assert answer.value.json()["resolution"] == "1m"
    expect(page.locator('[data-span="24h"]')).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#chart-power")).not_to_have_attribute("data-points", "0")
    expect(page.locator("#chart-power")).to_have_attribute("data-span-s", "86400")


def test_the_host_panel_shows_the_boot_chain_and_each_cards_bus(page: Page, rig: Rig) -> None:
    open_dashboard(page, rig)
    facts = rig.status()["host"]["facts"]

    expect(page.locator("#host")).to_be_visible()
    expect(page.locator("#host-verdict")).to_have_text("ok")
    expect(page.locator("#host-facts")).to_contain_text(f"Running kernel{facts['running_kernel']}")
    expect(page.locator("#host-facts")).to_contain_text("6 of 6 pairs OK")
    expect(page.locator("#host-cards tr")).to_have_count(4)
    row = page.locator('#host-cards tr[data-card="2"]')
    expect(row.locator(".bar1")).to_have_text("65,536 MiB")
    expect(row).to_contain_text("nvidia")
    expect(row).to_contain_text("1,728 MHz")
    expect(row.locator(".replays")).to_have_text("0")


def test_phone_width_has_no_horizontal_overflow(browser: Browser, rig: Rig) -> None:
    context = _context(browser, rig, PHONE)
    try:
        phone = context.new_page()
        open_dashboard(phone, rig)
        expect(phone.locator(".tile")).to_have_count(4)
        expect(phone.locator("#chart-power canvas")).to_have_count(1)
        # Charts follow their box through a ResizeObserver (a scrollbar appearing narrows
        # the page for a frame): the page must settle without overflow.
        try:
            phone.wait_for_function(
                "document.documentElement.scrollWidth <= document.documentElement.clientWidth",
                timeout=FAST_S * 1000,
            )
        except PlaywrightTimeout:
            wide = phone.evaluate(
                "[...document.querySelectorAll('body *')]"
                ".filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth)"
                ".slice(0, 5).map(e => e.tagName + '#' + e.id + '.' + e.className)"
            )
            pytest.fail(f"the page is wider than a phone; widest elements: {wide}")
        # One line per card: the four cards take less than a third of the first screen.
        for index in range(4):
            line = phone.locator(f'.tile[data-card="{index}"] .tile-line')
            expect(line).to_be_visible()
            expect(line).to_contain_text(f"#{index}")
            expect(line).to_contain_text("/180 W")
            expect(
                phone.locator(f'.tile[data-card="{index}"] [data-metric="power"]')
            ).to_be_hidden()
        # Measured in one script: each status frame draws the tiles anew, and a box asked
        # for element by element can meet one the next frame has already replaced (None).
        boxes = phone.evaluate(
            "[...document.querySelectorAll('.tile')].map(t => t.getBoundingClientRect())"
            ".map(r => ({y: r.y, width: r.width, height: r.height}))"
        )
        assert len(boxes) == 4, boxes
        for box in boxes:
            assert box["width"] <= PHONE["width"] and box["height"] <= 44, box
        assert boxes[-1]["y"] + boxes[-1]["height"] - boxes[0]["y"] < PHONE["height"] / 3
        phone.screenshot(path=rig.shots / "phone.png", full_page=True)
    finally:
        context.close()


def test_engine_buttons_need_the_token_and_a_confirmation(page: Page, rig: Rig) -> None:
    open_dashboard(page, rig)
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)

    page.click('[data-action="stop"]')  # no token yet: the page asks for it, posts nothing
    expect(page.locator("#token-form")).to_be_visible()
    assert posts == []
    page.fill("#token-input", rig.daemon.token)
    # Saving the token resumes the stop that asked for it: its question comes at once.
    asked: list[str] = []

    def answer(dialog: Dialog) -> None:
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", answer)
    page.click("#token-form button[type=submit]")
    expect(page.locator("#token-form")).to_be_hidden()
    # Each evaluate is a round trip to the page, during which the dialog's event arrives.
    wait_until(lambda: page.evaluate("1") and asked, 10, "the resumed stop's question")
    assert len(asked) == 1 and asked[0].startswith("Stop the engine?"), asked
    assert posts == []
    expect(page.locator("#engine-log")).to_contain_text("Application startup complete")

    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click('[data-action="stop"]')  # asked, and said no
    expect(page.locator("#engine-facts")).to_have_attribute("data-state", "ready")
    assert posts == []

    start, stop = page.locator('[data-action="start"]'), page.locator('[data-action="stop"]')
    restart = page.locator('[data-action="restart"]')
    expect(start).to_be_disabled()  # it runs already
    expect(start).to_have_attribute("title", re.compile("runs already"))
    expect(restart).to_be_enabled()

    page.once("dialog", lambda dialog: dialog.accept())
    stop.click()
    expect(page.locator("#engine-facts")).to_have_attribute("data-state", "stopped", timeout=15000)
    assert rig.status()["serving"]["state"] == "stopped"
    assert posts == [rig.daemon.url + "/api/v1/serving/stop"]
    # The answer is shown beside the buttons, not at the top of the page.
    result = page.locator("#engine-result")
    expect(result).to_contain_text("stop: accepted")
    expect(page.locator("#notice")).to_be_hidden()
    buttons, shown = box_of(page.locator("#engine .buttons").first), box_of(result)
    assert 0 <= shown["y"] - (buttons["y"] + buttons["height"]) < 40, (buttons, shown)
    expect(stop).to_be_disabled()
    expect(stop).to_have_attribute("title", "the engine is stopped")
    expect(restart).to_be_disabled()
    expect(start).to_be_enabled()

    # A refusal the daemon answers lands in the same place, marked as an error.
    refusal = {"detail": "start refused: cards_busy (memtest has the cards)", "code": "refused"}
    page.route("**/api/v1/serving/start", lambda route: route.fulfill(status=409, json=refusal))
    page.once("dialog", lambda dialog: dialog.accept())
    start.click()
    expect(result).to_have_text(refusal["detail"])
    expect(result).to_have_class(re.compile(r"\berror\b"))
    expect(page.locator("#notice")).to_be_hidden()
    page.unroute("**/api/v1/serving/start")

    page.once("dialog", lambda dialog: dialog.accept())
    start.click()
    expect(page.locator("#engine-facts")).to_have_attribute("data-state", "ready", timeout=20000)
    expect(result).to_contain_text("start: accepted")
    expect(result).not_to_have_class(re.compile(r"\berror\b"))


def test_the_active_profile_is_shown_and_a_switch_asks_first(page: Page, rig: Rig) -> None:
    with_token(page, rig)
    open_dashboard(page, rig)
    facts = page.locator("#engine-facts")
    expect(facts.locator('[data-fact="profile"] dd')).to_have_text("default")
    expect(page.locator("#profile-switch")).to_be_visible()
    page.select_option("#profile-select", "small")
    asked: list[str] = []

    def answer(dialog: Any, accept: bool) -> None:
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda dialog: answer(dialog, False))
    page.click("#profile-serve")
    expect(page.locator("#notice")).to_be_hidden()
    assert rig.status()["serving"]["profile"] == "default"
    assert "stopped cleanly first" in asked[0]

    page.once("dialog", lambda dialog: answer(dialog, True))
    page.click("#profile-serve")
    expect(facts.locator('[data-fact="profile"] dd')).to_have_text("small", timeout=20000)
    expect(facts).to_have_attribute("data-state", "ready", timeout=20000)
    events = rig.daemon.get("/api/v1/events?kind=operator&limit=20").json()
    assert any("switched from default to small" in event["message"] for event in events)
    # Back to the profile the other tests expect.
    back = rig.daemon.post("/api/v1/serving/switch", {"profile": "default"})
    assert back.status_code == 200, back.text
    wait_until(
        lambda: (
            rig.status()["serving"]["profile"] == "default"
            and rig.status()["serving"]["state"] == "ready"
        ),
        30,
        "the default profile serving again",
    )


def test_a_warning_is_acknowledged_from_the_timeline_and_news_has_no_ack(
    page: Page, rig: Rig
) -> None:
    with_token(page, rig)
    card = rig.status()["cards"][3]
    assert rig.daemon.post("/api/v1/sim/card/3", {"temperature_c": 85}).status_code == 200
    try:
        wait_until(
            lambda: any(
                e["severity"] == "warning"
                for e in rig.daemon.get("/api/v1/events?kind=check&card=3&limit=20").json()
            ),
            20,
            "card 3's temperature warning",
        )
        open_dashboard(page, rig)
        page.select_option("#filter-kind", "check")
        warning = page.locator("#event-list li[data-event]:has(.sev.warning)").first
        expect(warning).to_have_attribute("data-kind", "check")
        event_id = warning.get_attribute("data-event")
        page.once("dialog", lambda dialog: dialog.accept())
        warning.locator("[data-ack]").click()
        expect(page.locator(f'#event-list li[data-event="{event_id}"]')).to_have_class("acked")
        expect(page.locator("#events-result")).to_have_text(f"event {event_id} acknowledged")
        acked = rig.daemon.get("/api/v1/events?kind=check&limit=100").json()
        assert next(e for e in acked if str(e["id"]) == event_id)["acked"] is True
        page.check("#filter-unacked")
        expect(page.locator(f'#event-list li[data-event="{event_id}"]')).to_have_count(0)
        # News (info) asks nobody to acknowledge it: no Ack button on any of it.
        page.uncheck("#filter-unacked")
        page.select_option("#filter-kind", "daemon")
        expect(page.locator('#event-list li[data-kind="daemon"]').first).to_be_visible()
        expect(page.locator("#event-list li[data-event]:not(:has(.sev.info))")).to_have_count(0)
        expect(page.locator("#event-list [data-ack]")).to_have_count(0)
    finally:
        cooled = {"temperature_c": card["temperature_c"]}
        assert rig.daemon.post("/api/v1/sim/card/3", cooled).status_code == 200
        wait_until(lambda: rig.status()["overall"] == "ok", 20, "the rig OK again")


def test_a_daemon_restart_shows_reconnecting_then_recovers(page: Page, rig: Rig) -> None:
    open_dashboard(page, rig)
    expect(page.locator("#reconnecting")).to_be_hidden()
    old_pid = rig.daemon.proc.pid
    assert rig.daemon.stop(signal.SIGTERM) == 0
    if rig.daemon.peer is not None:
        rig.daemon.peer.close()
    expect(page.locator("#reconnecting")).to_be_visible(timeout=10000)
    expect(page.locator(".tile")).to_have_count(4)  # the last picture stays on screen
    rig.daemon = start_fleetd(
        rig.tmp, rig.daemon.state_dir, config=rig.config, port=rig.daemon.port
    )
    assert rig.daemon.proc.pid != old_pid
    expect(page.locator("#reconnecting")).to_be_hidden(timeout=10000)
    expect(page.locator("#verdict")).not_to_have_attribute("data-overall", "unknown")
    expect(page.locator(".tile")).to_have_count(4)


def with_token(page: Page, rig: Rig) -> None:
    page.add_init_script(f"localStorage.setItem('cmpfleet.api-token', '{rig.daemon.token}')")


def test_an_injected_xid31_shows_critical_then_the_confirmed_reboot_clears_it(
    browser: Browser, page: Page, rig: Rig
) -> None:
    with_token(page, rig)
    open_dashboard(page, rig)
    boot_before = rig.status()["rig"]["boot_id"]
    answer = rig.daemon.post("/api/v1/sim/xid", {"card": 1, "xid": 31})
    assert answer.status_code == 200, answer.text
    expect(page.locator("#verdict")).to_have_attribute("data-overall", "critical")
    expect(page.locator("#verdict-word")).to_have_text("CRITICAL")
    expect(page.locator('.tile[data-card="1"]')).to_have_attribute("data-state", "critical")
    expect(page.locator('.tile[data-card="1"] [data-metric="xids"]')).to_contain_text("1")
    # The timeline shows the Xid without waiting for its own refresh.
    expect(page.locator('#event-list li[data-kind="xid"]').first).to_contain_text("31")
    expect(
        page.locator('#check-list li[data-check="xid_since_boot"][data-card="1"]')
    ).to_be_visible()
    prompt = page.locator("#reboot")
    expect(prompt).to_be_visible()
    expect(page.locator("#reboot-reason")).to_contain_text("Xid 31 (MMU page fault) on card 1")
    expect(page.locator("#reboot-kind")).to_have_text("Warm reboot:")
    expect(page.locator("#engine-facts")).to_have_attribute("data-state", "stopped", timeout=20000)
    expect(page.locator("#reboot-since")).to_have_text(
        re.compile(r"^latched since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC[+-]\d\d:\d\d$")
    )
    # Under the latch nothing that starts the engine is offered, and each says why.
    for action in ("start", "restart"):
        button = page.locator(f'[data-action="{action}"]')
        expect(button).to_be_disabled()
        expect(button).to_have_attribute("title", re.compile(r"^reboot required \(Xid 31"))
    expect(page.locator('[data-action="stop"]')).to_be_disabled()  # stopped already
    expect(page.locator("#profile-serve")).to_be_disabled()
    expect(page.locator("#profile-serve")).to_have_attribute("title", re.compile("reboot required"))
    expect(page.locator("#engine-why-not")).to_contain_text("Start and Restart are off: reboot")
    # The Xid and the latch are marked on the charts' time axis, and listed in words.
    xid_column = marker_column(page, "chart-power", "xid")
    assert painted_column(page, "chart-power", CRIT_RGB, xid_column) > 0.2
    marker_column(page, "chart-temperature", "latch")
    expect(page.locator('#chart-markers li[data-marker="xid"]').first).to_contain_text(
        "Xid 31 on card 1"
    )
    page.screenshot(path=rig.shots / "critical.png", full_page=True)
    phone = _context(browser, rig, PHONE)
    try:
        small = phone.new_page()
        open_dashboard(small, rig)
        line = small.locator('.tile[data-card="1"] .tile-line')
        expect(line).to_contain_text("Xid 31")  # the failing check's tag, never "ok"
        expect(line.locator(".line-flags")).not_to_contain_text("ok")
        expect(small.locator('[data-action="start"]')).to_be_disabled()
        small.screenshot(path=rig.shots / "critical-phone.png", full_page=True)
    finally:
        phone.close()

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#reboot-confirm")
    expect(page.locator("#reboot-result")).to_contain_text(REBOOT_COMMAND, timeout=20000)
    expect(page.locator("#notice")).to_be_hidden()
    expect(prompt).to_be_hidden(timeout=20000)  # the new boot cleared the latch
    assert rig.status()["rig"]["boot_id"] != boot_before
    expect(page.locator("#bring-up")).to_contain_text("latch cleared", timeout=20000)
    expect(page.locator('.tile[data-card="1"] [data-metric="xids"]')).to_contain_text("0")
    expect(page.locator('[data-action="restart"]')).not_to_have_attribute(
        "title", re.compile("reboot required")
    )
    # The reboot is marked too; seconds after the Xid it can share its pixel column, where
    # the Xid is drawn on top.
    column = marker_column(page, "chart-power", "reboot")
    if abs(column - xid_column) > 1:
        assert painted_column(page, "chart-power", REBOOT_RGB, column) > 0.2
    expect(page.locator('#chart-markers li[data-marker="reboot"]').first).to_contain_text(
        "host rebooted"
    )


def test_the_latch_can_be_cleared_from_the_prompt_with_a_reason(page: Page, rig: Rig) -> None:
    with_token(page, rig)
    open_dashboard(page, rig)
    assert rig.daemon.post("/api/v1/sim/xid", {"card": 2, "xid": 31}).status_code == 200
    prompt = page.locator("#reboot")
    expect(prompt).to_be_visible(timeout=10000)
    page.once("dialog", lambda dialog: dialog.accept("dashboard test: card 2 reseated"))
    page.click("#reboot-clear")
    expect(prompt).to_be_hidden()
    assert rig.status()["recovery"]["reboot_required"] is False


def test_the_page_and_its_files_come_from_the_package_with_a_self_only_policy(rig: Rig) -> None:
    page = rig.daemon.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert "http" not in page.text.replace(rig.daemon.url, "")  # no absolute URL at all
    chart_lib = rig.daemon.get("/dashboard/uPlot.iife.min.js")
    assert chart_lib.status_code == 200
    assert "uPlot" in chart_lib.text
    assert rig.daemon.get("/dashboard/__init__.py").status_code == 404  # not the folder


def test_history_lays_every_series_on_one_grid(rig: Rig) -> None:
    history = rig.daemon.get("/api/v1/history?span=1h").json()
    assert history["resolution"] == "raw"
    assert history["step_s"] == 10
    grid = history["ts_s"]
    assert grid
    assert grid == sorted(set(grid))
    assert [card["card"] for card in history["cards"]] == [0, 1, 2, 3]
    for card in history["cards"]:
        for metric in ("power_draw_w", "temperature_c", "sm_clock_mhz"):
            assert len(card[metric]) == len(grid)
            assert any(value is not None for value in card[metric])
    assert len(history["engine"]["tokens_per_s"]) == len(grid)
    refused = rig.daemon.get("/api/v1/history?span=7d")
    assert refused.status_code == 422
    assert "1h" in refused.text
    assert "/api/v1/history" in rig.daemon.get("/openapi.json").json()["paths"]


def test_beyond_loopback_the_browser_logs_in_with_the_token(browser: Browser, rig: Rig) -> None:
    """A rig listening on all addresses: the page load is challenged for HTTP Basic, and with
    the token as the password the whole page works (the stream and the engine log included)."""
    port = free_port()
    wide = start_fleetd(
        rig.tmp,
        rig.tmp / "wide-state",
        config=rig.config,
        port=port,
        extra_args=["--listen", f"0.0.0.0:{port}"],
    )
    requests: list[str] = []
    try:
        refused = loopback.get(wide.url + "/", headers={"Accept": "text/html"}, timeout=10)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Basic ")
        login = {"username": "owner", "password": wide.token}
        context = browser.new_context(viewport=DESKTOP, http_credentials=login)  # type: ignore[arg-type]
        context.set_default_timeout(FAST_S * 1000)
        context.on("request", lambda request: requests.append(request.url))
        try:
            page = context.new_page()
            page.goto(wide.url + "/")
            expect(page.locator(".tile")).to_have_count(4)
            expect(page.locator("#engine-facts")).to_have_attribute(
                "data-state", "ready", timeout=30_000
            )
            expect(page.locator("#engine-log")).not_to_contain_text("enter the API token")
            expect(page.locator("#engine-log")).not_to_have_text("")
            assert wide.url + "/api/v1/stream?interval_s=2" in requests
            page.screenshot(path=rig.shots / "beyond-loopback.png", full_page=True)
        finally:
            context.close()
    finally:
        stop_all([wide])
    assert [url for url in requests if not url.startswith(wide.url + "/")] == []


def test_no_request_left_the_daemon(rig: Rig) -> None:
    assert rig.requests, "the pages above made no requests at all"
    outside = [url for url in rig.requests if not url.startswith(rig.daemon.url + "/")]
    assert outside == []


def test_a_card_that_failed_its_memory_test_shows_its_block_map(page: Page, rig: Rig) -> None:
    def doctored(route: Route) -> None:
        """The real status, with card 3's memory test failed."""
        status = route.fetch().json()
        status["checks"].append(
            {
                "id": "memtest",
                "card": 3,
                "severity": "critical",
                "message": "card 3: memory test of 2026-12-04 10:00 UTC: FAILED",
                "remedy": "",
            }
        )
        route.fulfill(json=status)

    verdict = "a few fixed blocks: 2 of 512 2 MiB blocks fail (#5, #300) at the same place"
    card = {
        "card": 3,
        "pci_bus_id": "0000:61:00.0",
        "outcome": "failed",
        "tested_mib": 1024,
        "bit_errors": 40,
        "bad_words": 12,
        "first_error_offset": 4096,
        "pattern": "solid",
        "error": None,
        "duration_s": 2.0,
        "blocks": [[5, 2], [300, 10]],
        "blocks_failed": 2,
        "blocks_tested": 512,
        "block_kib": 2048,
        "verdict": verdict,
    }
    page.route("**/api/v1/stream*", lambda route: route.fulfill(status=404, body="{}"))
    page.route("**/api/v1/status", doctored)
    page.route(
        "**/api/v1/diag/memtest",
        lambda route: route.fulfill(json={"running": False, "cards": [card]}),
    )
    open_dashboard(page, rig)

    shown = page.locator('#memmap .memmap-card[data-card="3"]')
    expect(shown).to_be_visible()
    expect(shown).to_contain_text(f"Card 3: {verdict}")
    expect(shown).to_contain_text("2 of 512 2 MiB blocks failed; 12 bad words, 40 bit errors")
    expect(shown.locator(".cell")).to_have_count(256)  # two blocks a cell on this card
    expect(shown.locator(".cell:not(.level0)")).to_have_count(2)
    expect(shown.locator(".cell").nth(150)).to_have_attribute(
        "title", "blocks #300-301: 10 bad word(s)"
    )
    page.unroute_all(behavior="ignoreErrors")
