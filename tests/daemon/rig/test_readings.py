"""fleetd's readings for its own checks: each from its part; a failing part costs only its own."""

from __future__ import annotations

import logging

import pytest

from daemon.rig.readings import ReadingSources
from hwcheck.checks.readings import KernelLogReading, MemtestReading, StoreReading

STORE = StoreReading(remedy="free disk", stuck_after_s=5.0)


def test_each_reading_comes_from_its_part_and_a_missing_part_gives_none() -> None:
    readings = ReadingSources(
        kernel_log=lambda: KernelLogReading("/dev/kmsg"), store=lambda: STORE
    ).read()
    assert readings.kernel_log == KernelLogReading("/dev/kmsg")
    assert readings.store is STORE
    assert readings.canaries is None and readings.memtest is None


def test_a_failing_part_is_left_out_logged_once_per_error_and_back_when_it_works(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = [True]

    def memtest() -> MemtestReading:
        if broken[0]:
            raise KeyError("outcome")
        return MemtestReading({})

    sources = ReadingSources(store=lambda: STORE, memtest=memtest)
    with caplog.at_level(logging.INFO, logger="fleetd"):
        first, second = sources.read(), sources.read()
        broken[0] = False
        healed = sources.read()
    assert first.memtest is None and second.memtest is None
    assert first.store is STORE, "the other readings still come"
    assert healed.memtest == MemtestReading({})
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("the memtest reading failed; its check is left out until it works") == 1
    assert messages.count("the memtest reading works again") == 1
