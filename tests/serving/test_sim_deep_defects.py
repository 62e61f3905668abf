"""The simulated engine's long-context defects, its vLLM metrics, /version and image store."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from serving.runtime.engine_metrics import figures_between, parse_engine_metrics
from serving.sim.defects import LongContextDefects, drifted, estimate_tokens, recall_reply
from serving.sim.images import SIM_ENGINE_IMAGE, ImageStore, build_flag, build_of
from serving.sim.scenario import EngineScenarioError, override_args, parse_engine_scenario
from serving.sim.vllm_metrics import SpecDecodeSim, VllmExtras
from tests.support.engine_helpers import SERVED_NAME, running_sim_engine

DEFECTS = LongContextDefects(
    corrupt_band=(72_000, 120_000),
    loop_after_tokens=100_000,
    recall_full_until_tokens=32_000,
    recall_floor=0.3,
    recall_floor_at_tokens=128_000,
)


def test_defects_follow_the_context_length() -> None:
    assert DEFECTS.copy_pct(16_000, 0.0) == 0.0
    assert DEFECTS.copy_pct(90_000, 0.0) == 85.0
    assert DEFECTS.copy_pct(120_000, 5.0) == 5.0  # the band ends
    assert not DEFECTS.loops(99_999) and DEFECTS.loops(100_000)
    assert DEFECTS.recall_ratio(32_000) == 1.0
    assert DEFECTS.recall_ratio(80_000) == pytest.approx(0.65)
    assert DEFECTS.recall_ratio(500_000) == 0.3
    assert LongContextDefects().recall_ratio(10**6) == 1.0
    assert DEFECTS.paced_prefill_tokens(1_000) == 1_000
    assert DEFECTS.paced_prefill_tokens(96_000) == 0  # deep prompts cost no real time
    assert LongContextDefects(prefill_pace_max_tokens=0).paced_prefill_tokens(96_000) == 96_000
    assert estimate_tokens("x" * 401) == 101


def test_recall_loses_the_deepest_facts_first() -> None:
    facts = " ".join(f"The code for gate {i} is K{i}-100{i}." for i in range(1, 5))
    prompt = f"{facts} filler. Give the code for each of these: gate 1, gate 2, gate 3, gate 4"
    half = recall_reply(prompt, 0.5, random.Random(0))
    assert half is not None
    lines = half.splitlines()
    assert lines[2:] == ["gate 3: K3-1003", "gate 4: K4-1004"]
    assert lines[0] != "gate 1: K1-1001" and lines[1] != "gate 2: K2-1002"
    assert recall_reply("no question here", 0.5, random.Random(0)) is None


def test_drift_changes_a_word_every_time() -> None:
    text = "the harbor was quiet in the morning"
    assert drifted(text, 1) != drifted(text, 2) != text


def test_extras_count_cache_hits_and_draft_acceptance_with_vllms_names() -> None:
    registry = CollectorRegistry()
    extras = VllmExtras(registry, "m", SpecDecodeSim(5, 0.6, collapse_after_s=10.0))
    prompt = "a" * 4096
    extras.observe(prompt, 1024, 41, 0.01, since_ready_s=1.0)
    extras.observe(prompt + "b" * 2048, 1536, 41, 0.01, since_ready_s=2.0)
    reading = parse_engine_metrics(generate_latest(registry).decode())
    figures = figures_between(reading, None, None)
    assert figures.prefix_cache_hit_ratio == pytest.approx(1024 / 2560)  # 4 blocks hit once
    assert figures.spec_acceptance_ratio == pytest.approx(0.6, abs=0.02)
    assert figures.spec_mean_accepted_tokens == pytest.approx(4.0, abs=0.1)
    assert figures.itl_p50_s == pytest.approx(0.01, abs=0.005)
    after = VllmExtras(CollectorRegistry(), "m", SpecDecodeSim(5, 0.6, 10.0, 0.1))
    assert after.spec.acceptance_at(11.0) == 0.1


def test_scenario_keys_become_flags_and_bad_ones_name_the_key() -> None:
    engine = parse_engine_scenario(
        {"corrupt_band_tokens": [72000, 92000], "loop_after_tokens": 100000, "drift": True,
         "speculative": False, "spec_collapse_after_s": 300, "spec_acceptance": 0.7},
        "x.toml",
    )  # fmt: skip
    assert engine.corrupt_band_tokens == (72000, 92000)
    assert not engine.speculative
    for bad, words in (
        ({"corrupt_band_tokens": [9, 1]}, "corrupt_band_tokens: expected [FROM, TO]"),
        ({"recall_floor": 2}, "recall_floor: must be 0 to 1"),
        ({"loop_after_tokens": "soon"}, "loop_after_tokens: expected a whole number"),
        ({"speculative": "no"}, "speculative: expected true or false"),
    ):
        with pytest.raises(
            EngineScenarioError, match=re.escape(f"scenario x.toml: engine.{words}")
        ):
            parse_engine_scenario(bad, "x.toml")
    assert override_args({"corrupt_identifiers_pct": 30}, "rebuild") == [
        "--sim-corrupt-identifiers-pct", "30.0",
    ]  # fmt: skip
    assert "--sim-tokens-per-s" in override_args({"tokens_per_s": 7.5}, "rebuild")


def test_a_rebuild_keeps_the_tag_and_changes_the_digest(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "sim-images.json")
    first = store.facts(SIM_ENGINE_IMAGE)
    assert store.facts(SIM_ENGINE_IMAGE) == first
    second = store.rebuild(SIM_ENGINE_IMAGE, args=["--sim-drift"], labels={"p": "2"})
    assert (second["build"], second["image"]) == (2, SIM_ENGINE_IMAGE)
    assert second["digest"] != first["digest"] and second["id"] != first["id"]
    assert second["digest"].startswith("cmpfleet/sim-engine@sha256:")
    assert build_of(str(store.path)) == second
    assert build_flag(["serve", "m", "--sim-build-file", "/x"]) == "/x"
    assert build_flag(["--sim-build-file=/y"]) == "/y"
    (tmp_path / "bad.json").write_text("[]")
    assert build_of(str(tmp_path / "bad.json")) is None


@pytest.fixture
def rebuilt_engine(tmp_path: Path) -> Iterator[str]:
    store = ImageStore(tmp_path / "sim-images.json")
    store.rebuild(SIM_ENGINE_IMAGE, args=["--sim-loop-after-tokens", "10"], version="9.9.9")
    with running_sim_engine("--sim-build-file", str(store.path)) as url:
        yield url


def test_the_engine_runs_its_images_build(rebuilt_engine: str) -> None:
    assert httpx.get(f"{rebuilt_engine}/version").json() == {"version": "9.9.9"}
    tool = {"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}
    body = {
        "model": SERVED_NAME,
        "messages": [{"role": "user", "content": "check the run " * 20}],
        "tools": [tool],
        "max_tokens": 64,
    }
    reply = httpx.post(f"{rebuilt_engine}/v1/chat/completions", json=body, timeout=10).json()
    message = reply["choices"][0]["message"]
    assert message.get("tool_calls") is None  # the build's loop flag: past 10 tokens it loops
    assert "Let me check" in message["content"]
    assert json.dumps(reply)  # a whole OpenAI-shaped document
