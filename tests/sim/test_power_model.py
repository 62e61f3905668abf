"""The simulation worth benchmarking: the cap's curves, the draw, the engine's speed model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hwcheck.sim.power_model import (
    POWER_FILE,
    decode_factor,
    draw_w,
    engine_factors,
    prefill_factor,
    write_power_file,
)
from serving.sim.perf import (
    PerfModel,
    PerfSettings,
    acceptance,
    batch_total_factor,
    depth_factor,
    spec_gain,
)


def test_the_recipes_figures_hold_at_the_reference_cap() -> None:
    assert decode_factor(180.0) == pytest.approx(1.0)
    assert prefill_factor(180.0) == pytest.approx(1.0)
    assert 4800 < 5300 * prefill_factor(100.0) < 5100  # "about 5,000 prefill even at 100 W"
    assert batch_total_factor(64) == pytest.approx(712.8 / 98.1, rel=0.01)
    assert 98.1 * depth_factor(1_000_000) == pytest.approx(35.6, rel=0.02)
    assert spec_gain(3.03 / 6, 6) == pytest.approx(98.1 / 50.8, rel=0.01)


def test_tokens_per_joule_peak_inside_the_cards_range() -> None:
    caps = range(100, 301, 5)
    per_joule = {cap: decode_factor(cap) / draw_w(cap, 1.0, 58.0) for cap in caps}
    best = max(per_joule, key=per_joule.__getitem__)
    assert 100 < best < 300
    assert per_joule[best] > 1.1 * per_joule[100] and per_joule[best] > 1.1 * per_joule[300]
    # The draw follows the load: idle, one stream, a full batch; a cap below clips it.
    assert draw_w(180.0, 0.0, 58.0) == 58.0
    assert 58.0 < draw_w(180.0, 1 / 8, 58.0) < draw_w(180.0, 1.0, 58.0) <= 180.0
    assert draw_w(110.0, 1.0, 58.0) == 110.0


def test_acceptance_falls_with_depth_and_temperature() -> None:
    cold = acceptance(0.6, 1_000, 0.0)
    assert acceptance(0.6, 1_000, 1.0) < cold
    assert acceptance(0.6, 100_000, 0.0) < cold


def test_the_engine_reads_the_caps_the_rig_writes(tmp_path: Path) -> None:
    write_power_file(tmp_path, [180.0, 100.0, None, 180.0])
    written = json.loads((tmp_path / POWER_FILE).read_text())
    assert written == engine_factors([100.0])  # the slowest card sets the pace
    settings = PerfSettings(time_scale=2.0, power_file=str(tmp_path / POWER_FILE))
    model = PerfModel(settings, 30.0, 1600.0, 8, None, 0.6)
    assert model.single_stream_tok_s == 60.0  # rig units: the wall pace times the scale
    assert model.stream_tok_s(0, 0.0) == pytest.approx(60.0 * decode_factor(100.0))
    # A wall wait is the rig's time times the scale.
    assert model.token_wait_s(0, 0.0) == pytest.approx(2.0 / (60.0 * decode_factor(100.0)))
    model.started()
    model.started()
    assert model.stream_tok_s(0, 0.0) == pytest.approx(
        60.0 * decode_factor(100.0) * batch_total_factor(2) / 2
    )
