"""Memory-test runs in the store: one event per run, each card's last verdict kept until a run
that tests it again (a failure survives restarts; a card that could not be tested keeps its
verdict), on SQLite and PostgreSQL alike."""

from __future__ import annotations

from daemon.store import Store
from daemon.store.memtests import run_severity
from hwcheck.memtest.results import CardMemtest, MemtestOutcome
from hwcheck.model import EventKind, Severity
from tests.support.store_rows import T0, at

CARD0, CARD3 = "0000:01:00.0", "0000:61:00.0"
PASSED = MemtestOutcome.PASSED
FAILED = MemtestOutcome.FAILED


def test_a_run_is_one_diag_event_and_sets_the_verdicts(store: Store) -> None:
    failed = CardMemtest(3, FAILED, 4096, 37, 0x1000, "0xaaaaaaaa")
    event_id = store.record_memtest(
        [(CardMemtest(0, PASSED, 4096), CARD0), (failed, CARD3)],
        message="memory test found errors on card(s) 3",
        details={"gib": 4.0},
        now=T0,
    )

    (event,) = store.list_events(kind=EventKind.DIAG)
    assert event.id == event_id
    assert (event.severity, event.card, event.pci_bus_id) == (Severity.CRITICAL, 3, CARD3)
    assert event.details == {"gib": 4.0}
    verdicts = store.memtest_verdicts()
    assert verdicts[CARD3]["outcome"] == "failed"
    assert verdicts[CARD3]["bit_errors"] == 37
    assert verdicts[CARD3]["ts"] == T0.isoformat()
    assert verdicts[CARD0]["outcome"] == "passed"


def test_only_a_run_that_tests_the_card_changes_its_verdict(store: Store) -> None:
    store.record_memtest([(CardMemtest(3, FAILED, 64, 1), CARD3)], message="m", details={}, now=T0)
    could_not = CardMemtest(3, MemtestOutcome.ERROR, error="CUDA_ERROR_DEVICES_UNAVAILABLE")
    store.record_memtest([(could_not, CARD3)], message="m", details={}, now=at(60))

    assert store.memtest_verdicts()[CARD3]["outcome"] == "failed"

    store.record_memtest(
        [(CardMemtest(3, PASSED, 64), CARD3)], message="m", details={}, now=at(120)
    )

    assert store.memtest_verdicts()[CARD3]["outcome"] == "passed"
    assert [e.severity for e in store.list_events(kind=EventKind.DIAG)] == [
        Severity.INFO,
        Severity.WARNING,
        Severity.CRITICAL,
    ]


def test_run_severity() -> None:
    assert run_severity([CardMemtest(0, PASSED)]) is Severity.INFO
    assert run_severity([CardMemtest(0, PASSED), CardMemtest(1, MemtestOutcome.UNAVAILABLE)]) is (
        Severity.WARNING
    )
    assert run_severity([CardMemtest(0, MemtestOutcome.TIMED_OUT)]) is Severity.CRITICAL
