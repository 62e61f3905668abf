"""Every canary against the real simulated engine in every mode, over loopback HTTP.

One engine process per mode for the whole module; rates are high so a round takes well
under a second, and each test's expectations are the engine's own flags.
"""

from __future__ import annotations

import contextlib
import random
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from serving.canary.client import CanaryCallError, HttpEngineApi
from serving.canary.model import Outcome
from serving.canary.settings import CanarySettings
from serving.canary.suite import CanarySuite, Expectations
from tests.support import loopback
from tests.support.engine_helpers import SERVED_NAME, free_port, kill_group, sim_argv

DECODE_TOK_S = 100.0
PREFILL_TOK_S = 4000.0
FAST = ("--sim-tokens-per-s", str(DECODE_TOK_S), "--sim-prefill-tokens-per-s", str(PREFILL_TOK_S))
SETTINGS = CanarySettings(
    timeout_s=5.0,
    throughput_prompt_tokens=2000,
    throughput_max_tokens=24,
    filler_tokens=200,
    busy_running_requests=0,
)
EXPECTED = Expectations(DECODE_TOK_S, PREFILL_TOK_S)


@contextmanager
def engine(*flags: str, hung: bool = False) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        sim_argv(port, *flags, ready_after_s=0.0),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60  # a Python start on a box shared with other suites
        while not _state_reached(url, hung):
            assert time.monotonic() < deadline, (
                f"the simulated engine did not get {'hung' if hung else 'ready'}"
            )
            time.sleep(0.05)
        yield url
    finally:
        kill_group(process.pid)
        process.wait(timeout=5)


def _state_reached(url: str, hung: bool) -> bool:
    """Ready: ``/health`` says 200. Hung: it no longer answers (only a ready engine hangs)."""
    try:
        status = loopback.get(f"{url}/health", timeout=0.3 if hung else 1.0).status_code
    except httpx.TimeoutException:
        return hung
    except httpx.HTTPError:
        return False
    return status == 200 and not hung


class Suites:
    """Makes suites for a test and closes their HTTP clients after it."""

    def __init__(self) -> None:
        self.apis: list[HttpEngineApi] = []

    def __call__(
        self, url: str, brake: bool = False, settings: CanarySettings = SETTINGS
    ) -> CanarySuite:
        api = HttpEngineApi(url, SERVED_NAME)
        self.apis.append(api)
        return CanarySuite(api, settings, EXPECTED, lambda: brake, random.Random(11))

    def results(self, url: str) -> dict[str, tuple[Outcome, str, str]]:
        return {r.name: (r.result, r.message, r.advice) for r in self(url).run_round()}


@pytest.fixture
def suite() -> Iterator[Suites]:
    suites = Suites()
    yield suites
    for api in suites.apis:
        api.close()


@pytest.fixture(scope="module")
def healthy() -> Iterator[str]:
    with engine(*FAST) as url:
        yield url


def test_a_healthy_engine_passes_every_canary(healthy: str, suite: Suites) -> None:
    found = suite(healthy).run_round()
    # The throughput canary times the engine's process by the wall clock: on a 2-core host
    # at load 10 a healthy simulated engine measured a third of its decode rate. Up to two
    # more rounds; a broken engine stays slow in all three.
    for _ in range(2):
        if next(r for r in found if r.name == "throughput").result is Outcome.PASS:
            break
        found = suite(healthy).run_round()
    assert [r.name for r in found] == [
        "copy_fidelity",
        "tool_calls",
        "reasoning_field",
        "throughput",
    ]
    assert {r.name: r.result for r in found} == dict.fromkeys(
        ("copy_fidelity", "tool_calls", "reasoning_field", "throughput"), Outcome.PASS
    ), [(r.name, r.message) for r in found]
    copy_result = found[0]
    assert copy_result.figure == 1.0
    assert copy_result.details["total"] == 40


def test_a_corrupting_engine_fails_copy_fidelity_and_tool_calls(suite: Suites) -> None:
    with engine(*FAST, "--sim-corrupt-identifiers-pct", "20", "--sim-leak-dsml") as url:
        found = suite.results(url)
    copy_result, copy_message, copy_advice = found["copy_fidelity"]
    assert copy_result is Outcome.FAIL, copy_message
    assert copy_message.startswith("32/40 identifiers copied exactly")
    assert "token corruption" in copy_advice
    assert found["tool_calls"][0] is Outcome.FAIL
    assert "raw markup" in found["tool_calls"][1]
    assert found["reasoning_field"][0] is Outcome.PASS


@pytest.mark.parametrize(
    ("field", "result"),
    [("reasoning_content", Outcome.PASS), ("reasoning", Outcome.WARN), ("content", Outcome.FAIL)],
)
def test_reasoning_placement_modes(field: str, result: Outcome, suite: Suites) -> None:
    with engine(*FAST, "--sim-reasoning-field", field) as url:
        found = suite(url).run_one("reasoning_field")
    assert found.result is result, found.message


def test_a_quarter_speed_engine_warns_and_names_the_brake_when_it_is_active(
    suite: Suites,
) -> None:
    slow = (
        "--sim-tokens-per-s",
        str(DECODE_TOK_S / 4),
        "--sim-prefill-tokens-per-s",
        str(PREFILL_TOK_S / 4),
    )
    with engine(*slow) as url:
        small = SETTINGS.model_copy(update={"throughput_prompt_tokens": 500})
        braked = suite(url, brake=True, settings=small).run_one("throughput")
        unbraked = suite(url, brake=False, settings=small).run_one("throughput")
    assert braked.result is Outcome.WARN, braked.message
    assert braked.figure is not None and braked.figure < 0.4 * DECODE_TOK_S
    assert braked.advice.startswith("the power_brake check is active")
    assert unbraked.result is Outcome.WARN
    assert "thermal" in unbraked.advice


def test_a_busy_engine_skips_the_round_and_force_runs_it(healthy: str, suite: Suites) -> None:
    api = HttpEngineApi(healthy, SERVED_NAME)
    suite.apis.append(api)
    long_body = {
        "messages": [{"role": "user", "content": "go"}],
        "max_tokens": 4000,
        "ignore_eos": True,
        "stream": True,
    }
    holder = threading.Thread(
        target=lambda: _drain(HttpEngineApi(healthy, SERVED_NAME), long_body), daemon=True
    )
    holder.start()
    deadline = time.monotonic() + 5
    while api.running_requests(1.0) != 1:
        assert time.monotonic() < deadline, "the long request never showed as running"
        time.sleep(0.02)
    skipped = suite(healthy).run_round()
    assert {r.result for r in skipped} == {Outcome.SKIPPED}
    assert "engine busy: 1 requests running (more than 0)" in skipped[0].message
    forced = suite(healthy).run_one("tool_calls")
    assert forced.result is Outcome.PASS


def _drain(api: HttpEngineApi, body: dict[str, object]) -> None:
    try:
        with contextlib.suppress(CanaryCallError):  # the engine is torn down under it
            api.stream_timing(body, 60.0)
    finally:
        api.close()


def test_a_hung_engine_times_out_each_canary_without_blocking_the_next_round(
    suite: Suites,
) -> None:
    settings = SETTINGS.model_copy(update={"timeout_s": 0.2, "filler_tokens": 0})
    with engine(*FAST, "--sim-hang-after-s", "0.2", hung=True) as url:
        started = time.monotonic()
        first = suite(url, settings=settings).run_round()
        second = suite(url, settings=settings).run_round()
        took_s = time.monotonic() - started
    assert {r.result for r in first + second} == {Outcome.WARN}, [
        (r.name, r.message) for r in first + second
    ]
    assert all("timed out" in r.message for r in first)
    # Bounded by the timeouts (2 rounds x 4 canaries x load check and request, 3.2 s), not
    # by the engine (which never answers): generous for a CI box shared with other suites.
    assert took_s < 60, took_s
