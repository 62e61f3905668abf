"""When the deep round is due: after the interval since the last one, sooner after a cut."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from daemon.canaries.deep_schedule import FIRST_DEEP_AFTER_S, DeepSchedule


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def test_the_last_deep_round_sets_the_next_and_a_cut_round_retries_sooner() -> None:
    clock = Clock()
    schedule = DeepSchedule(24, clock, retry_s=900)
    now = datetime(2026, 12, 4, tzinfo=UTC)
    schedule.load(now - timedelta(hours=23), now)
    assert not schedule.due()
    clock.now_s += 3600
    assert schedule.due()
    schedule.ran(interrupted=True)
    clock.now_s += 899
    assert not schedule.due()
    clock.now_s += 1
    assert schedule.due()
    schedule.ran(interrupted=False)
    clock.now_s += 23 * 3600
    assert not schedule.due()


def test_never_run_waits_an_hour_and_zero_means_never() -> None:
    clock = Clock()
    first = DeepSchedule(24, clock)
    first.load(None)
    clock.now_s += FIRST_DEEP_AFTER_S
    assert first.due()
    never = DeepSchedule(0, clock)
    never.load(None)
    never.ran(interrupted=False)
    clock.now_s += 10**9
    assert not never.due()
