"""What a simulated card's power cap and load do: its draw, and the engine's speed at that cap.

A CMP 170HX under a cap runs its clocks down until it fits: the engine slows little from
180 W to about 125 W and fast below about 110 W, while the draw falls with the cap. So tokens
per joule has an optimum inside the card's 100-300 W range (about 125 W for decode at full
load here), and the best tok/J within 5% of the best throughput is near 150 W. The curves keep the
recipes' figures: at the 180 W cap every factor is 1 (the rig the figures were taken on),
and prefill (compute-bound, chunked) keeps about 5,000 of its 5,300 tok/s at 100 W, as the
recipe's authors wrote. A card draws about 150 W at full load (600 W for four cards),
whatever its cap above that, and its idle draw when no request runs.

The simulated rig writes the engine's factors to a small JSON file in its state dir (the
slowest card of the pipeline sets the pace) each time a cap changes; the simulated engine
(``serving.sim.perf``) reads it before each wait. That file is the simulation's only
channel from the cards to the engine's speed; nothing here touches a real card.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterable
from pathlib import Path

from hwcheck.atomic import atomic_write

POWER_FILE = "sim-engine-power.json"
REFERENCE_CAP_W = 180.0  # the cap the recipes' figures were taken at
FULL_LOAD_DRAW_W = 150.0  # one card at full load (600 W for four: the recipe's figure)
# Decode: 1 - exp(-(cap - floor) / scale), normalised to the reference cap.
DECODE_FLOOR_W = 85.0
DECODE_SCALE_W = 14.0
BOOST_SHARE = 0.15  # of the headroom above the demand, drawn anyway by boosting clocks
PREFILL_FLOOR_W = 70.0
PREFILL_SCALE_W = 12.0


def _curve(cap_w: float, floor_w: float, scale_w: float) -> float:
    def raw(watts: float) -> float:
        return 1.0 - math.exp(-max(watts - floor_w, 0.0) / scale_w)

    return raw(cap_w) / raw(REFERENCE_CAP_W)


def decode_factor(cap_w: float) -> float:
    """The engine's decode speed at ``cap_w`` against its speed at the reference 180 W."""
    return _curve(cap_w, DECODE_FLOOR_W, DECODE_SCALE_W)


def prefill_factor(cap_w: float) -> float:
    """Prefill's speed at ``cap_w`` against the reference cap (about 0.92 at 100 W)."""
    return _curve(cap_w, PREFILL_FLOOR_W, PREFILL_SCALE_W)


def draw_w(cap_w: float | None, load_fraction: float, idle_w: float) -> float:
    """A card's draw with ``load_fraction`` of the engine's slots busy (0: idle).

    The demand rises with the batch (a single stream keeps the SMs half fed); a cap below
    it clips it; a cap above it lets the clocks boost a little: some more power for no
    more speed (so a high cap costs tokens per joule).
    """
    if load_fraction <= 0:
        return idle_w
    share = min(load_fraction, 1.0)
    demand_w = idle_w + (FULL_LOAD_DRAW_W - idle_w) * math.sqrt(math.sqrt(share))
    if cap_w is None:
        return demand_w
    if cap_w <= demand_w:
        return max(cap_w, min(idle_w, cap_w))
    return demand_w + BOOST_SHARE * (cap_w - demand_w) * min(share * 4, 1.0)


def engine_factors(caps_w: Iterable[float | None]) -> dict[str, float]:
    """The engine's factors on cards with ``caps_w``: the slowest card sets the pace."""
    known = [cap for cap in caps_w if cap is not None]
    cap = min(known) if known else REFERENCE_CAP_W
    return {"cap_w": cap, "decode": decode_factor(cap), "prefill": prefill_factor(cap)}


def write_power_file(state_dir: Path, caps_w: Iterable[float | None]) -> None:
    """Tell the simulated engine what the caps in force do to its speed (best effort)."""
    # On a full disk the engine keeps its last factors: that must not break a cap change.
    with contextlib.suppress(OSError):
        atomic_write(state_dir / POWER_FILE, json.dumps(engine_factors(caps_w)))
