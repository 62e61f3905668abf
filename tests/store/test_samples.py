"""Cards, raw samples, 1-minute rollups, retention pruning and the chart query."""

from __future__ import annotations

from datetime import timedelta

import pytest

from daemon.store import CardMove, ChartResolution, MetricStat, Store, StoreInputError
from tests.support.store_rows import T0, at, card, poll


def test_a_card_that_moved_slots_keeps_its_identity(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        assert store.record_samples(poll(at(0), card(0), card(1))) == []
        moved = store.record_samples(
            poll(
                at(1),
                card(2, uuid="GPU-test-0", serial="SN0000", pci_bus_id="00000000:03:00.0"),
                card(1),
            )
        )
    finally:
        store.close()

    assert moved == [CardMove("GPU-test-0", "0000:01:00.0", "0000:03:00.0", 0, 2)]
    reopened = Store.open(store_url)
    try:
        cards = {row.uuid: row for row in reopened.list_cards()}
        assert (cards["GPU-test-0"].pci_bus_id, cards["GPU-test-0"].index) == ("0000:03:00.0", 2)
        assert cards["GPU-test-0"].first_seen == at(0)
        assert cards["GPU-test-1"].pci_bus_id == "0000:02:00.0"
        (event,) = [e for e in reopened.list_events(kind="daemon") if "moved" in e.message]
        assert (
            event.message
            == "card GPU-test-0 moved from 0000:01:00.0 (card 0) to 0000:03:00.0 (card 2)"
        )
        # A fresh process (empty cache) notices a move from what the database says.
        back = reopened.record_samples(poll(at(2), card(0), card(1)))
        assert back == [CardMove("GPU-test-0", "0000:03:00.0", "0000:01:00.0", 2, 0)]
    finally:
        reopened.close()


def test_last_seen_follows_the_polls(store: Store) -> None:
    for second in (0, 30, 61):
        store.record_samples(poll(at(second), card(0)))
    (row,) = store.list_cards()
    assert (row.first_seen, row.last_seen) == (at(0), at(61))


def test_raw_samples_round_trip_and_a_repeated_poll_is_ignored(store: Store) -> None:
    store.record_samples(poll(at(0), card(0, power_draw_w=101.5), card(1)))
    store.record_samples(poll(at(1), card(0, power_draw_w=102.5, lost=True), card(1)))
    store.record_samples(poll(at(1), card(0, power_draw_w=999.0), card(1)))

    chart = store.chart("GPU-test-0", at(0), at(60), resolution="raw")

    assert chart.resolution is ChartResolution.RAW
    assert [(p.ts, p.n) for p in chart.points] == [(at(0), 1), (at(1), 1)]
    assert [p.power_draw_w for p in chart.points] == [
        MetricStat(101.5, 101.5, 101.5),
        MetricStat(102.5, 102.5, 102.5),
    ]


def _known_minutes(store: Store) -> None:
    """Card 0: three samples in minute 0, two in minute 1, one in minute 2 (incomplete)."""
    readings = [
        (0, 100.0, 50.0, 1000, 10),
        (20, 110.0, 60.0, 1200, 20),
        (40, 150.0, 70.0, 1400, 60),
        (60, 200.0, 80.0, 1300, 100),
        (90, 220.0, 82.0, 1310, 100),
        (125, 300.0, 90.0, 900, 5),
    ]
    for second, power, temp, clock, mem in readings:
        cards = [
            card(0, power_draw_w=power, temperature_c=temp, sm_clock_mhz=clock, memory_used_mib=mem)
        ]
        if second == 20:  # card 1 answered once, and was lost
            cards.append(
                card(
                    1,
                    power_draw_w=None,
                    temperature_c=None,
                    sm_clock_mhz=None,
                    memory_used_mib=None,
                    lost=True,
                )
            )
        store.record_samples(poll(at(second), *cards))


def test_rollups_hold_min_avg_max_of_complete_minutes(store: Store) -> None:
    _known_minutes(store)

    report = store.rollup_and_prune(now=at(126))

    assert (report.minutes_rolled, report.rollup_rows_written) == (2, 3)
    assert report.watermark == at(120)
    assert (report.raw_deleted, report.rollups_deleted) == (0, 0)
    stored = store.chart("GPU-test-0", at(0), at(120), resolution="1m").points
    assert [(p.ts, p.n) for p in stored] == [(at(0), 3), (at(60), 2)]
    first, second = stored
    assert first.power_draw_w == MetricStat(100.0, 120.0, 150.0)
    assert first.temperature_c == MetricStat(50.0, 60.0, 70.0)
    assert first.sm_clock_mhz == MetricStat(1000.0, 1200.0, 1400.0)
    assert first.memory_used_mib == MetricStat(10.0, 30.0, 60.0)
    assert second.power_draw_w == MetricStat(200.0, 210.0, 220.0)
    lost = store.chart("GPU-test-1", at(0), at(120), resolution="1m").points
    assert [(p.ts, p.n, p.power_draw_w) for p in lost] == [(at(0), 1, None)]

    # Running again changes nothing: no duplicate minutes, same figures.
    again = store.rollup_and_prune(now=at(126))
    assert (again.minutes_rolled, again.rollup_rows_written) == (0, 0)
    assert store.chart("GPU-test-0", at(0), at(120), resolution="1m").points == stored


def test_the_minute_chart_includes_minutes_not_rolled_yet(store: Store) -> None:
    _known_minutes(store)
    store.rollup_and_prune(now=at(126))

    points = store.chart("GPU-test-0", at(0), at(180), resolution="1m").points

    assert [(p.ts, p.n) for p in points] == [(at(0), 3), (at(60), 2), (at(120), 1)]
    assert points[2].power_draw_w == MetricStat(300.0, 300.0, 300.0)

    store.record_samples(poll(at(150), card(0, power_draw_w=310.0)))
    store.rollup_and_prune(now=at(190))
    points = store.chart("GPU-test-0", at(0), at(180), resolution="1m").points
    assert points[2].n == 2
    assert points[2].power_draw_w == MetricStat(300.0, 305.0, 310.0)


def test_pruning_keeps_each_window_exactly(store: Store) -> None:
    for second in range(0, 3 * 3600 + 1, 60):
        store.record_samples(poll(at(second), card(0, power_draw_w=float(second))))

    report = store.rollup_and_prune(
        now=at(3 * 3600), raw_retention_s=3600, rollup_retention_s=7200, delete_batch_rows=7
    )

    assert report.raw_deleted == 120  # samples before now - 1 h (02:00:00 itself is kept)
    assert report.rollups_deleted == 60  # minutes before now - 2 h
    raw = store.chart("GPU-test-0", at(0), at(4 * 3600), resolution="raw").points
    assert (len(raw), raw[0].ts, raw[-1].ts) == (61, at(7200), at(10800))
    minutes = store.chart("GPU-test-0", at(0), at(4 * 3600), resolution="1m").points
    assert minutes[0].ts == at(3600)
    assert [p.ts for p in minutes] == [at(s) for s in range(3600, 10801, 60)]
    assert minutes[0].power_draw_w == MetricStat(3600.0, 3600.0, 3600.0)


def test_a_long_gap_rolls_up_without_walking_every_minute(store: Store) -> None:
    store.record_samples(poll(at(0), card(0)))
    store.record_samples(poll(at(3 * 86400), card(0)))

    report = store.rollup_and_prune(now=at(3 * 86400 + 120), raw_retention_s=10 * 86400)

    assert report.rollup_rows_written == 2
    assert report.watermark == at(3 * 86400 + 60)
    assert [p.ts for p in store.chart("GPU-test-0", at(0), at(4 * 86400)).points] == [
        at(0),
        at(3 * 86400),
    ]


def test_chart_resolution_follows_the_span(store: Store) -> None:
    for second in range(0, 600, 10):
        store.record_samples(poll(at(second), card(0)))

    short = store.chart("GPU-test-0", at(0), at(3600))
    day = store.chart("GPU-test-0", at(600) - timedelta(hours=24), at(600))

    assert (short.resolution, len(short.points)) == (ChartResolution.RAW, 60)
    assert (day.resolution, len(day.points)) == (ChartResolution.MINUTE, 10)
    assert all(p.n == 6 for p in day.points)


def test_chart_input_errors_are_one_line(store: Store) -> None:
    store.record_samples(poll(at(0), card(0)))
    with pytest.raises(StoreInputError, match="unknown card uuid 'GPU-nope'"):
        store.chart("GPU-nope", at(0), at(60))
    with pytest.raises(StoreInputError, match="chart span is empty"):
        store.chart("GPU-test-0", at(60), at(0))
    with pytest.raises(StoreInputError, match="unknown chart resolution '5m'"):
        store.chart("GPU-test-0", at(0), at(60), resolution="5m")
    with pytest.raises(StoreInputError, match="has no timezone"):
        store.chart("GPU-test-0", T0.replace(tzinfo=None), at(60))
    with pytest.raises(StoreInputError, match="retention must be positive"):
        store.rollup_and_prune(now=at(0), raw_retention_s=0)


def test_engine_samples_round_trip_and_prune(store: Store) -> None:
    store.record_engine_sample(at(0), tokens_per_s=41.5, requests_running=2, requests_waiting=0)
    store.record_engine_sample(at(7200), kv_cache_usage_pct=37.5)

    rows = store.list_engine_samples(at(0), at(8000))
    assert [(r.ts, r.tokens_per_s, r.kv_cache_usage_pct) for r in rows] == [
        (at(0), 41.5, None),
        (at(7200), None, 37.5),
    ]

    report = store.rollup_and_prune(now=at(7300), raw_retention_s=3600)
    assert report.engine_samples_deleted == 1
    assert [r.ts for r in store.list_engine_samples(at(0), at(8000))] == [at(7200)]
