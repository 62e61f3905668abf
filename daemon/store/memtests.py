"""Memory-test runs: each one an event (kind ``diag``), and each card's last verdict.

A failure must stay CRITICAL for its card until a passing run, across fleetd restarts and
reboots (a bad HBM cell does not heal at boot), so the verdicts live in the ``kv`` table
keyed by the card's PCI address (its NVML index can change when a card is missing),
written in the same transaction as the run's event. A run that could not test a card
(no driver library, a CUDA error before any pattern) leaves that card's verdict alone.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Any

from daemon.store.db import Database
from daemon.store.events import insert_event
from daemon.store.keyvalue import get_value, lock_key, set_value
from hwcheck.memtest.results import CardMemtest, MemtestOutcome
from hwcheck.model import EventKind, Severity

MEMTEST_VERDICTS = "memtest_verdicts"
_VERDICT_OUTCOMES = (MemtestOutcome.PASSED, MemtestOutcome.FAILED, MemtestOutcome.TIMED_OUT)


def run_severity(results: Sequence[CardMemtest]) -> Severity:
    """Critical when a card failed, warning when one could not be tested, else info."""
    if any(r.outcome.failure for r in results):
        return Severity.CRITICAL
    if any(r.outcome is not MemtestOutcome.PASSED for r in results):
        return Severity.WARNING
    return Severity.INFO


class MemtestQueries(Database):
    """``Store`` methods for memory-test runs and per-card verdicts."""

    def record_memtest(
        self,
        results: Sequence[tuple[CardMemtest, str]],
        *,
        message: str,
        details: dict[str, Any],
        now: datetime | None = None,
        minutes: float = 0.0,
        kept: Collection[str] = (),
    ) -> int:
        """One run (``(result, PCI address)`` per card): its event, and the verdicts it sets.

        ``minutes``: the run's stress time, kept with each verdict (what a retest must
        cover); ``kept``: addresses whose verdict stays (a pass that did not retest what
        failed there).
        """
        ts = now or datetime.now(UTC)
        with self.write() as session:
            lock_key(session, MEMTEST_VERDICTS)
            verdicts = dict(get_value(session, MEMTEST_VERDICTS) or {})
            for result, address in results:
                if result.outcome in _VERDICT_OUTCOMES and address not in kept:
                    verdicts[address] = {
                        **result.as_dict(),
                        "ts": ts.isoformat(),
                        "minutes": minutes,
                    }
            set_value(session, MEMTEST_VERDICTS, verdicts, ts)
            failed = [r for r, _ in results if r.outcome.failure]
            return insert_event(
                session,
                EventKind.DIAG,
                run_severity([r for r, _ in results]),
                message,
                card=failed[0].card if len(failed) == 1 else None,
                pci_bus_id=next((a for r, a in results if r.outcome.failure), None)
                if len(failed) == 1
                else None,
                details=details,
                ts=ts,
            )

    def memtest_verdicts(self) -> dict[str, dict[str, Any]]:
        """Each tested card's last verdict by PCI address (``CardMemtest`` dict plus ``ts``)."""
        with self.read() as session:
            return dict(get_value(session, MEMTEST_VERDICTS) or {})
