"""The deep round: against a scripted engine (busy, budget, refusals) and the real simulated one.

The simulated engine runs with the long-context defects of the ``deep-decay`` scenario
(flags made from the scenario's own ``[engine]`` table) and with drift at temperature 0;
its deep prompts cost no real time, so a round at 16k-110k tokens takes a few seconds.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hwcheck.sim.scenario import load_scenario
from serving.canary.client import CanaryCallError, HttpEngineApi
from serving.canary.deep import DeepRound
from serving.canary.model import DEEP_NAMES, Outcome
from serving.canary.settings import CanarySettings
from serving.canary.suite import Expectations
from serving.sim.scenario import parse_engine_scenario, simulated_engine_args
from tests.support.engine_helpers import SERVED_NAME, running_sim_engine

SETTINGS = CanarySettings(
    busy_running_requests=0, identifiers=10, depths=[16_000, 90_000, 110_000], recall_facts=8
)
DSPARK = ("--speculative-config", '{"method":"dspark","num_speculative_tokens":5}')


class Scripted:
    """An engine that answers deep prompts well, except what a test scripts."""

    def __init__(self, refuse_above: int | None = None) -> None:
        self.running = 0
        self.sent: list[dict[str, Any]] = []
        self.refuse_above = refuse_above
        self.busy_after: int | None = None

    def chat(self, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self.sent.append(body)
        if self.busy_after is not None and len(self.sent) >= self.busy_after:
            self.running = 3
        chars = sum(len(str(m.get("content") or "")) for m in body["messages"])
        if self.refuse_above is not None and chars // 4 > self.refuse_above:
            raise CanaryCallError(
                "the engine answered HTTP 400: This model's maximum context length is 32768"
            )
        prompt = str(body["messages"][-1]["content"])
        if body.get("tools"):
            call = {"type": "function", "function": {"name": "get_run_status", "arguments": "{}"}}
            message: dict[str, Any] = {"content": None, "tool_calls": [call]}
        elif "BEGIN LIST" in prompt:
            message = {
                "content": prompt.split("BEGIN LIST\n", 1)[1].split("\nEND LIST", maxsplit=1)[0]
            }
        elif "Give the code for" in prompt:
            pairs = [p.split(" is ") for p in prompt.split("The code for ")[1:]]
            lines = [f"{label}: {rest.split('.', 1)[0]}" for label, rest in pairs]
            message = {"content": "\n".join(lines)}
        else:
            message = {"content": "the same words every time"}
        return {"choices": [{"message": message}], "usage": {"prompt_tokens": chars // 4}}

    def stream_timing(self, body: dict[str, Any], timeout_s: float) -> Any:
        raise AssertionError("the deep round streams nothing")

    def running_requests(self, timeout_s: float) -> int | None:
        return self.running

    def close(self) -> None:
        """Nothing to close."""


def by_name(results: list[Any]) -> dict[str, Any]:
    return {r.name: r for r in results}


def test_a_good_engine_passes_every_depth_and_records_the_engines_count() -> None:
    engine = Scripted()
    results = DeepRound(engine, SETTINGS, Expectations(), random.Random(1)).run()
    assert [r.name for r in results] == list(DEEP_NAMES)
    assert {r.result for r in results} == {Outcome.PASS}
    copy = by_name(results)["copy_depth"]
    depths = copy.details["depths"]
    assert [d["depth"] for d in depths] == [16_000, 90_000, 110_000]
    assert 0.9 < depths[-1]["prompt_tokens"] / 110_000 < 1.1
    assert copy.details["breaks_at"] is None


def test_a_user_request_mid_round_skips_the_rest_and_marks_it_interrupted() -> None:
    engine = Scripted()
    engine.busy_after = 2
    deep = DeepRound(engine, SETTINGS, Expectations(), random.Random(1))
    results = by_name(deep.run())
    assert deep.interrupted is not None and "engine busy" in deep.interrupted
    assert [d["result"] for d in results["copy_depth"].details["depths"]] == [
        "pass", "pass", "skipped",
    ]  # fmt: skip
    assert results["recall"].result is Outcome.SKIPPED
    assert len(engine.sent) == 2


def test_depths_over_the_context_are_skipped_not_failed() -> None:
    engine = Scripted(refuse_above=32_768)
    results = by_name(DeepRound(engine, SETTINGS, Expectations(), random.Random(1)).run())
    copy = results["copy_depth"]
    assert copy.result is Outcome.PASS  # 16k judged, the others are not the build's fault
    assert [d["result"] for d in copy.details["depths"]] == ["pass", "skipped", "skipped"]
    assert "longer than the engine's context" in copy.details["depths"][1]["message"]
    planned = by_name(DeepRound(Scripted(), SETTINGS, Expectations(max_model_len=32_768)).run())
    assert "max_model_len 32768" in planned["recall"].details["depths"][-1]["message"]


def test_over_the_budget_nothing_more_is_sent() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 100.0  # every reading is 100 s later
        return now[0]

    settings = SETTINGS.model_copy(update={"deep_budget_s": 250.0})
    engine = Scripted()
    results = DeepRound(engine, settings, Expectations(), random.Random(1), clock=clock).run()
    assert all("time budget" in d["message"] for d in by_name(results)["loop"].details["depths"])
    assert len(engine.sent) < 3


@contextmanager
def sim_engine(*flags: str) -> Iterator[HttpEngineApi]:
    fast = ("--sim-tokens-per-s", "500", "--sim-prefill-tokens-per-s", "200000")
    with running_sim_engine(*fast, *flags) as url:
        api = HttpEngineApi(url, SERVED_NAME)
        try:
            yield api
        finally:
            api.close()


def scenario_flags(table: dict[str, Any]) -> list[str]:
    """The simulated engine's flags for an ``[engine]`` table (pace flags dropped)."""
    args = simulated_engine_args(parse_engine_scenario(table, "test"))
    return args[4:]  # past --sim-ready-after-s and --sim-tokens-per-s


def test_the_deep_decay_engine_breaks_deep_and_only_deep() -> None:
    deep_decay = load_scenario("deep-decay")
    flags = scenario_flags(dict(deep_decay.engine))
    started = time.monotonic()
    with sim_engine(*flags, *DSPARK) as api:
        results = by_name(
            DeepRound(api, SETTINGS, Expectations(speculative="dspark"), random.Random(2)).run()
        )
    elapsed_s = time.monotonic() - started
    figures = {
        name: {d["depth"]: d["figure"] for d in results[name].details["depths"]}
        for name in ("copy_depth", "recall", "loop")
    }
    assert figures["copy_depth"][16_000] == 1.0
    assert figures["copy_depth"][90_000] < 0.5
    assert figures["recall"][16_000] == 1.0 > figures["recall"][90_000] > figures["recall"][110_000]
    assert figures["loop"] == {16_000: 1.0, 90_000: 1.0, 110_000: 0.0}
    assert results["copy_depth"].details["breaks_at"] == 90_000
    assert results["loop"].result is Outcome.FAIL
    assert results["determinism"].result is Outcome.PASS
    print(f"deep round against the simulated engine: {elapsed_s:.1f} s")


def test_determinism_warns_on_a_drifting_engine_without_speculation_and_explains_it_with() -> None:
    flags = scenario_flags({"drift": True, "speculative": False})
    with sim_engine(*flags) as api:
        plain = DeepRound(api, SETTINGS.model_copy(update={"depths": [2_000]}), Expectations())
        drifted = by_name(plain.run())["determinism"]
        dspark = DeepRound(
            api, SETTINGS.model_copy(update={"depths": [2_000]}), Expectations(speculative="dspark")
        )
        explained = by_name(dspark.run())["determinism"]
    assert drifted.result is Outcome.WARN
    assert "drifts at temperature 0" in drifted.message
    assert explained.result is Outcome.PASS
    assert explained.message.startswith("not expected")
