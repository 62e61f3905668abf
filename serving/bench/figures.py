"""One cell's figures, in a real rig's units, from what its streams and the cards measured.

Per cell: decode tok/s per stream (median over streams) and in total (the streams' decode
rates added up: the batch's rate while they run together), prefill tok/s
(prompt tokens over time to first token, median), TTFT (median and worst), inter-token
latency p50/p95, speculative acceptance (the engine's own counters over the cell), each
card's mean draw, and tokens per joule: tokens generated over the energy NVML's counters
moved during the cell, every card of the rig together.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from serving.bench.load import CellRun, StreamSample
from serving.bench.matrix import Cell


def percentile(values: list[float], share: float) -> float | None:
    """The ``share`` percentile (nearest rank) of ``values``; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(min(round(share * (len(ordered) - 1)), len(ordered) - 1), 0)
    return ordered[rank]


@dataclass(frozen=True, slots=True)
class CellFigures:
    """A finished cell, every time in rig seconds (``None``: not measured)."""

    key: str
    concurrency: int
    depth_tokens: int
    temperature: float
    streams_ok: int
    errors: list[str]
    decode_tok_s_per_stream: float | None
    decode_tok_s_total: float | None
    prefill_tok_s: float | None
    ttft_s: float | None
    ttft_max_s: float | None
    itl_p50_ms: float | None
    itl_p95_ms: float | None
    spec_acceptance: float | None
    power_w: dict[str, float]
    energy_j: float | None
    tokens_per_joule: float | None
    generated_tokens: int
    time_scale: float

    def as_dict(self) -> dict[str, Any]:
        """JSON form (the store and the API)."""
        return asdict(self)

    @property
    def cell(self) -> Cell:
        """The matrix point."""
        return Cell(self.concurrency, self.depth_tokens, self.temperature)


def _ttft_rig_s(sample: StreamSample) -> float | None:
    """Time to first token in rig seconds: the prefill at its own scale, the rest at the engine's."""
    if sample.first_s is None:
        return None
    wall_prefill = sample.prefill_wall_s
    if wall_prefill is None or sample.prefill_scale == sample.time_scale:
        return sample.first_s / sample.prefill_scale
    rest = max(sample.first_s - wall_prefill, 0.0)
    return wall_prefill / sample.prefill_scale + rest / sample.time_scale


def _acceptance(run: CellRun) -> float | None:
    before, after = run.accepted_before, run.accepted_after
    if before is None or after is None:
        return None
    drafted = after[0] - before[0]
    return None if drafted <= 0 else (after[1] - before[1]) / drafted


def cell_figures(run: CellRun) -> CellFigures:
    """The figures of one cell's raw measurements."""
    good = [s for s in run.streams if s.error is None and len(s.token_s) >= 2]
    errors = sorted({s.error for s in run.streams if s.error is not None})
    scale = good[0].time_scale if good else 1.0
    per_stream = [
        (len(s.token_s) - 1) / ((s.token_s[-1] - s.token_s[0]) / scale)
        for s in good
        if s.token_s[-1] > s.token_s[0]
    ]
    generated = sum(max(s.completion_tokens, len(s.token_s)) for s in run.streams)
    # The streams' decode rates added up: what the batch decodes per second while they run
    # together (the recipes' "712.8 tok/s at 64 concurrent"), not diluted by the queue of
    # prefills before the last stream starts.
    total = sum(per_stream) if per_stream else None
    ttfts = [t for s in good if (t := _ttft_rig_s(s)) is not None]
    prefill = [
        s.prompt_tokens / t
        for s in good
        if s.prompt_tokens and (t := _ttft_rig_s(s)) is not None and t > 0
    ]
    gaps_ms = [
        (later - earlier) / scale * 1000.0
        for s in good
        for earlier, later in zip(s.token_s, s.token_s[1:], strict=False)
    ]
    metering = run.metering
    cards = sorted(set(metering.start_mj) & set(metering.end_mj))
    energy_j = None
    if cards:
        moved_mj = sum(metering.end_mj[c] - metering.start_mj[c] for c in cards)
        energy_j = moved_mj / 1000.0 / scale if moved_mj > 0 else None
    power = {
        str(card): round(statistics.fmean(draws), 1)
        for card, draws in sorted(metering.draws_w.items())
        if draws
    }
    cell = run.cell
    return CellFigures(
        key=cell.key,
        concurrency=cell.concurrency,
        depth_tokens=cell.depth_tokens,
        temperature=cell.temperature,
        streams_ok=len(good),
        errors=errors,
        decode_tok_s_per_stream=statistics.median(per_stream) if per_stream else None,
        decode_tok_s_total=total,
        prefill_tok_s=statistics.median(prefill) if prefill else None,
        ttft_s=statistics.median(ttfts) if ttfts else None,
        ttft_max_s=max(ttfts) if ttfts else None,
        itl_p50_ms=percentile(gaps_ms, 0.5),
        itl_p95_ms=percentile(gaps_ms, 0.95),
        spec_acceptance=_acceptance(run),
        power_w=power,
        energy_j=energy_j,
        tokens_per_joule=None if not energy_j else generated / energy_j,
        generated_tokens=generated,
        time_scale=scale,
    )


def figures_from_dict(data: dict[str, Any]) -> CellFigures:
    """A stored cell back (unknown keys from a newer cmpfleet ignored)."""
    names = set(CellFigures.__dataclass_fields__)
    return CellFigures(**{k: v for k, v in data.items() if k in names})
