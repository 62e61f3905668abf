"""A PCIe counter's rate reads its first and last known values only, wherever they are.

``hwcheck.hostfacts.counters``: each poll judges every card's counters over the samples
held, so the rate is found from the two ends of the window instead of a list of every point.
"""

from __future__ import annotations

from hwcheck.hostfacts.counters import aer_ends, counter_rate, counter_sample, replay_ends
from hwcheck.hostfacts.model import AerCounts, DeviceAer

CARD = "0000:01:00.0"
OTHER = "0000:02:00.0"


def test_the_ends_skip_samples_that_did_not_read_the_counter() -> None:
    samples = [
        counter_sample(0.0, [(OTHER, 5)]),
        counter_sample(1.0, [(CARD, 10), (OTHER, 6)]),
        counter_sample(2.0, [(CARD, 99)]),  # a middle point: not part of the rate
        counter_sample(3.0, [(CARD, 40)]),
        counter_sample(4.0, [(OTHER, 7), (CARD, None)]),
    ]
    assert replay_ends(samples, CARD) == [(1.0, 10), (3.0, 40)]
    rate = counter_rate(replay_ends(samples, CARD))
    assert rate is not None and rate.delta == 30 and rate.span_s == 2.0
    assert replay_ends(samples, "0000:03:00.0") == []


def test_one_reading_is_no_rate_and_a_reset_is_none() -> None:
    once = [counter_sample(0.0, []), counter_sample(1.0, [(CARD, 3)]), counter_sample(2.0, [])]
    assert replay_ends(once, CARD) == [(1.0, 3)]
    assert counter_rate(replay_ends(once, CARD)) is None
    reset = [counter_sample(0.0, [(CARD, 50)]), counter_sample(9.0, [(CARD, 2)])]
    assert counter_rate(replay_ends(reset, CARD)) is None


def test_aer_ends_read_one_field_of_one_device() -> None:
    def device(address: str, correctable: int | None) -> DeviceAer:
        return DeviceAer(address, AerCounts(correctable=correctable))

    samples = [
        counter_sample(0.0, [], [device(OTHER, 1)]),
        counter_sample(60.0, [], [device(CARD, 4), device(OTHER, 2)]),
        counter_sample(120.0, [], [device(CARD, None)]),
        counter_sample(180.0, [], [device(CARD, 10)]),
    ]
    assert aer_ends(samples, CARD, lambda c: c.correctable) == [(60.0, 4), (180.0, 10)]
