"""The simulated decode keeps its rate through a late wake-up, never through a stall.

The cards' rate does not follow the host's CPU load: a pacing thread that wakes a few tens
of ms late (a 2-core host at load 10 did, at every token, and the simulated decode measured
75% of its rate) keeps its schedule. One that fell behind by more than
``SCHEDULING_JITTER_S`` (a stall) starts a fresh schedule, never a burst of catch-up tokens.
"""

from __future__ import annotations

import time

from serving.sim.core import SCHEDULING_JITTER_S, EngineLog, SimEngine
from serving.sim.options import parse_options


def engine(tokens_per_s: float) -> SimEngine:
    options = parse_options(["serve", "m", "--sim-tokens-per-s", str(tokens_per_s)])
    sim = SimEngine(options, EngineLog())
    sim.ready.set()
    return sim


def test_a_late_wake_up_keeps_the_schedule() -> None:
    sim = engine(10_000)  # a token every 0.1 ms: any wake-up is "late"
    since = time.monotonic() - SCHEDULING_JITTER_S / 2  # the last token's deadline, half of it ago
    deadline = sim.pace(1, since=since)
    assert deadline < time.monotonic() - SCHEDULING_JITTER_S / 4  # kept: no wait was added


def test_a_stall_starts_a_fresh_schedule() -> None:
    sim = engine(10_000)
    before = time.monotonic()
    deadline = sim.pace(1, since=before - 5 * SCHEDULING_JITTER_S)
    assert deadline >= before  # from now, not from the missed deadline
