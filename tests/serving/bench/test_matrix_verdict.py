"""The bench's pure parts: the matrix and its clipping, the figures, the verdict, the sweep."""

from __future__ import annotations

import pytest

from serving.bench.figures import CellFigures, cell_figures, percentile
from serving.bench.load import CellRun, Metering, StreamSample
from serving.bench.matrix import Axes, BadAxis, Cell, max_num_seqs_of, parse_depth, plan
from serving.bench.sweep import SweepStep, parse_sweep, recommend, sweep_caps
from serving.bench.verdict import BrakeReading, EarlierRun, judge
from serving.recipe.reference import ReferenceFigures

REFERENCE = ReferenceFigures(
    source="test",
    decode_tok_s=98.1,
    prefill_tok_s=5300.0,
    concurrent_total_tok_s=712.8,
    concurrency=64,
)


def test_depths_read_as_the_recipes_write_them() -> None:
    assert parse_depth("1k") == 1_000
    assert parse_depth("100k") == 100_000
    assert parse_depth("1m") == 1_000_000
    assert parse_depth("4096") == 4096
    with pytest.raises(BadAxis, match="expected a number of tokens"):
        parse_depth("deep")


def test_concurrency_clipped_to_max_num_seqs_and_depth_to_the_model_length_with_notes() -> None:
    matrix = plan(Axes(), max_num_seqs=8, max_model_len=32768)
    assert matrix.concurrency == (1, 8)
    assert matrix.depths == (1_000, 32_000, 32768 - 128 - 64)
    assert any("concurrency 64 clipped to 8" in note for note in matrix.notes)
    assert any("depth 100k clipped to 32576" in note for note in matrix.notes)
    assert len(matrix.cells) == 2 * 3 * 2
    assert plan(Axes(), 256, None).notes == ()
    assert max_num_seqs_of(("--max-num-seqs", "8")) == 8
    assert max_num_seqs_of(("--max-num-seqs=16",)) == 16
    assert max_num_seqs_of(()) == 256


def _run(cell: Cell, gaps_s: list[float], scale: float = 2.0) -> CellRun:
    streams = []
    for _ in range(cell.concurrency):
        times = [0.5]
        for gap in gaps_s:
            times.append(times[-1] + gap)
        streams.append(
            StreamSample(
                sent_s=0.0,
                first_s=0.5,
                token_s=times,
                prompt_tokens=1000,
                completion_tokens=len(times),
                time_scale=scale,
                prefill_scale=scale,
            )
        )
    metering = Metering({0: 0.0}, {0: 40_000.0}, {0: [150.0, 150.0]})
    return CellRun(cell, streams, metering, 1.0, (0.0, 0.0), (100.0, 60.0))


def test_figures_are_in_rig_units() -> None:
    # Wall: a token every 20 ms at scale 2 (two wall seconds per rig second): 100 tok/s.
    figures = cell_figures(_run(Cell(2, 1000, 0.0), [0.02] * 10))
    assert figures.decode_tok_s_per_stream == pytest.approx(100.0)
    assert figures.decode_tok_s_total == pytest.approx(200.0)
    assert figures.itl_p50_ms == pytest.approx(10.0)
    assert figures.ttft_s == pytest.approx(0.25)
    assert figures.prefill_tok_s == pytest.approx(4000.0)
    assert figures.spec_acceptance == pytest.approx(0.6)
    # 40 J on the counter in wall time is 20 J of rig time; 22 tokens.
    assert figures.energy_j == pytest.approx(20.0)
    assert figures.tokens_per_joule == pytest.approx(22 / 20.0)
    assert figures.power_w == {"0": 150.0}
    assert percentile([], 0.5) is None


def _cells(decode: float, prefill: float = 5300.0) -> list[CellFigures]:
    figures = cell_figures(_run(Cell(1, 32000, 0.0), [0.02] * 10))
    return [
        CellFigures(
            **{
                **figures.as_dict(),
                "decode_tok_s_per_stream": decode,
                "prefill_tok_s": prefill,
            }
        )
    ]


def test_at_reference_below_it_with_the_brake_first_and_a_regression_naming_builds() -> None:
    off = BrakeReading(())
    assert judge(_cells(97.0), REFERENCE, off, "B").status == "at_reference"
    braked = BrakeReading((0, 1, 2, 3), (88.0,) * 4, (1140,) * 4)
    verdict = judge(_cells(24.5, 1300.0), REFERENCE, braked, "B")
    assert verdict.text.startswith("below reference: check the power brake first")
    assert "PWRBRK# asserted on cards 0-3 (88 W, 1,140 MHz)" in verdict.text
    # The brake first even when an earlier build was faster.
    earlier = EarlierRun(3, "build A", 98.0)
    assert judge(_cells(24.5), REFERENCE, braked, "build B", None, earlier).status == (
        "below_reference"
    )
    regression = judge(_cells(60.0), REFERENCE, off, "build B", None, earlier)
    assert regression.status == "regression"
    assert regression.text.startswith("a regression since build build A")
    assert "build B" in regression.text and "98.0" in regression.text
    below = judge(_cells(60.0), REFERENCE, off, "B")
    assert below.text.startswith("below reference: check the power brake first (brake reading:")
    assert "not asserted" in below.text
    assert judge(_cells(60.0), None, off, "B").status == "no_reference"


def test_sweep_recommends_the_best_tok_per_joule_within_five_percent_of_the_fastest() -> None:
    steps = [
        SweepStep(100.0, 300.0, 3.0),  # the most efficient, but 30% slower
        SweepStep(150.0, 420.0, 2.8),
        SweepStep(200.0, 430.0, 2.6),
        SweepStep(250.0, 431.0, 2.5),
    ]
    best = recommend(steps)
    assert best is not None and best.cap_w == 150.0
    assert recommend([SweepStep(100.0, None, None)]) is None
    assert parse_sweep("100:250:25") == (100.0, 250.0, 25.0)
    assert sweep_caps(100, 250, 25) == [100, 125, 150, 175, 200, 225, 250]
    for bad in ("100-250", "250:100:25", "100:250:0"):
        with pytest.raises(ValueError, match="--cap-sweep"):
            parse_sweep(bad)
