"""fleetd's own checks in the registry: readings in, results out, like the hardware checks.

``kernel_log``, ``store``, ``engine_output`` and ``memtest`` judge ``CheckInput.readings``
(``hwcheck.checks.readings``); a reading left out means no result. The messages and
remedies here are the ones fleetd has always shown (status, history and alerts read them).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hwcheck.checks import (
    CHECK_IDS,
    CHECKS,
    FLEETD_CHECK_IDS,
    KNOWN_CHECK_IDS,
    Readings,
    run_checks,
)
from hwcheck.checks.readings import (
    BlindSpellReading,
    CanaryReading,
    CanaryVerdict,
    HostCommandsReading,
    KernelLogReading,
    MemtestReading,
    StoreFailure,
    StoreReading,
)
from hwcheck.memtest.results import CardMemtest, MemtestOutcome
from hwcheck.model import Severity
from tests.support.cards import bus_id, make_input

AT = datetime(2026, 12, 3, 3, 7, 9, tzinfo=UTC)


def every_reading() -> Readings:
    """A healthy fleetd: the follower reads, the store writes, canaries pass, memtest passed."""
    return Readings(
        kernel_log=KernelLogReading(source="/dev/kmsg"),
        store=StoreReading(remedy="free disk", stuck_after_s=5.0),
        canaries=CanaryReading(
            ready_since=AT,
            verdicts=(
                CanaryVerdict("copy_fidelity", "pass", Severity.OK, 1.0, "ratio", "ok", "", AT),
            ),
        ),
        memtest=MemtestReading.from_stored(
            {
                bus_id(0): {
                    **CardMemtest(0, MemtestOutcome.PASSED, tested_mib=2048).as_dict(),
                    "ts": AT.isoformat(),
                }
            }
        ),
        host_commands=HostCommandsReading("systemctl reboot"),
    )


def test_fleetd_checks_follow_the_hardware_ones_in_the_registry() -> None:
    assert FLEETD_CHECK_IDS == (
        "kernel_log",
        "store",
        "engine_output",
        "memtest",
        "reboot_command",
    )
    assert [c.id for c in CHECKS] == [*CHECK_IDS, *FLEETD_CHECK_IDS]
    assert frozenset((*CHECK_IDS, *FLEETD_CHECK_IDS)) == KNOWN_CHECK_IDS
    assert not set(CHECK_IDS) & set(FLEETD_CHECK_IDS)


def test_without_readings_fleetd_checks_report_nothing() -> None:
    ids = {r.id for r in run_checks(make_input())}
    assert ids == set(CHECK_IDS)


def test_with_readings_every_fleetd_check_reports_after_the_hardware() -> None:
    inp = replace(make_input(), readings=every_reading())
    results = run_checks(inp)
    order = [r.id for r in results]
    assert sorted(set(order), key=order.index) == [*CHECK_IDS, *FLEETD_CHECK_IDS]
    fleetd = {r.id: r for r in results if r.id in FLEETD_CHECK_IDS and r.card in (None, 0)}
    assert fleetd["kernel_log"].message == "following the kernel log (/dev/kmsg)"
    assert fleetd["store"].message == "the store writes"
    assert fleetd["engine_output"].message == "1 canaries pass on the serving engine"
    assert fleetd["memtest"].message.startswith("card 0 (0000:01:00.0): memory test of ")
    assert fleetd["reboot_command"].message == "systemctl reboot is here"
    memtest_cards = [r.card for r in results if r.id == "memtest"]
    assert memtest_cards == [0, 1, 2, 3], "one result per live card, tested or not"
    assert {r.severity for r in results if r.id in FLEETD_CHECK_IDS} == {Severity.OK}


def test_a_follower_down_is_a_warning_naming_the_error_and_the_spell() -> None:
    down = BlindSpellReading(AT, "KernelLogUnavailable: journalctl exited 1", 42.4)
    inp = replace(
        make_input(), readings=Readings(kernel_log=KernelLogReading("journal", down=down))
    )
    (result,) = [r for r in run_checks(inp) if r.id == "kernel_log"]
    assert (result.severity, result.card) == (Severity.WARNING, None)
    assert result.message == (
        "kernel-log follower down since 03:07:09 UTC (42 s, retrying): "
        "KernelLogUnavailable: journalctl exited 1; Xids are not seen meanwhile"
    )
    assert result.remedy is not None and "restart fleetd" in result.remedy


def test_a_blind_spell_that_ended_is_named_in_the_ok_result() -> None:
    spell = BlindSpellReading(AT, "OSError: Input/output error", 12.0)
    reading = KernelLogReading("/dev/kmsg", last_spell=spell)
    (result,) = [
        r
        for r in run_checks(replace(make_input(), readings=Readings(kernel_log=reading)))
        if r.id == "kernel_log"
    ]
    assert result.severity is Severity.OK
    assert result.message == (
        "following the kernel log (/dev/kmsg); blind for 12 s from 03:07:09 UTC "
        "(OSError: Input/output error)"
    )


def test_a_failing_store_is_critical_with_the_polls_it_lost() -> None:
    reading = StoreReading(
        remedy="free disk space",
        stuck_after_s=5.0,
        failure=StoreFailure("database or disk is full", 61.0),
        dropped=4,
    )
    (result,) = [
        r
        for r in run_checks(replace(make_input(), readings=Readings(store=reading)))
        if r.id == "store"
    ]
    assert result.severity is Severity.CRITICAL
    assert result.message == (
        "the store cannot write for 61 s: database or disk is full; 4 poll(s) not stored "
        "(status is served from memory)"
    )
    assert result.remedy == "free disk space"


def test_a_write_waiting_past_the_limit_is_critical_and_one_within_it_is_not() -> None:
    waiting = StoreReading(remedy="r", stuck_after_s=5.0, waiting_s=4.9)
    stuck = replace(waiting, waiting_s=6.0)
    judged = [
        [
            r
            for r in run_checks(replace(make_input(), readings=Readings(store=s)))
            if r.id == "store"
        ]
        for s in (waiting, stuck)
    ]
    assert [r.severity for (r,) in judged] == [Severity.OK, Severity.CRITICAL]
    assert judged[1][0].message.startswith("a store write has waited 6 s")


def test_the_worst_canary_on_the_serving_run_is_the_engine_output() -> None:
    fail = CanaryVerdict(
        "copy_fidelity", "fail", Severity.CRITICAL, 0.78, "ratio", "mangled", "fix it", AT
    )
    old_fail = replace(fail, name="tool_calls", ts=AT - timedelta(seconds=1))
    reading = CanaryReading(ready_since=AT, verdicts=(old_fail, fail))
    (result,) = [
        r
        for r in run_checks(replace(make_input(), readings=Readings(canaries=reading)))
        if r.id == "engine_output"
    ]
    assert result.severity is Severity.CRITICAL
    assert result.message == "copy_fidelity fail (78%): mangled"
    assert result.remedy == "fix it"


def test_a_failed_memtest_is_critical_for_its_card_only() -> None:
    failed = CardMemtest(
        2, MemtestOutcome.FAILED, tested_mib=4096, bit_errors=37, first_error_offset=0x1F400000
    )
    reading = MemtestReading.from_stored(
        {bus_id(2): {**failed.as_dict(), "ts": "2026-12-03T03:07:09.123+00:00"}}
    )
    results = [
        r
        for r in run_checks(replace(make_input(), readings=Readings(memtest=reading)))
        if r.id == "memtest"
    ]
    assert {r.card: r.severity for r in results} == {
        0: Severity.OK,
        1: Severity.OK,
        2: Severity.CRITICAL,
        3: Severity.OK,
    }
    bad = results[2]
    assert bad.message.startswith("card 2 (0000:03:00.0): memory test of 2026-12-03 03:07:09 UTC: ")
    assert "37 bit errors" in bad.message
    assert bad.remedy is not None and "diag memtest --card 2" in bad.remedy
