"""``store``: does fleetd's store write? (rig-wide, from ``readings.store``)

With the disk full every write fails; while another process holds the SQLite write lock
every write waits. Either way status is served from memory and history is lost: critical
while writes fail, or while one has waited longer than ``stuck_after_s``, with how many
polls were not stored. fleetd's store writer keeps the reading (``daemon.store.writer``).
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput
from hwcheck.checks.readings import StoreReading
from hwcheck.checks.spec import Alert, CheckSpec, CheckText
from hwcheck.model import CheckResult, Severity

CHECK_ID = "store"


def check(inp: CheckInput) -> list[CheckResult]:
    """The registry's entry: one rig-wide result when fleetd has a store."""
    reading = inp.readings.store
    return [] if reading is None else [judge(reading)]


def judge(reading: StoreReading) -> CheckResult:
    """The ``store`` result for one reading of the writer."""
    lost = f"; {reading.dropped} poll(s) not stored" if reading.dropped else ""
    failure, waiting_s = reading.failure, reading.waiting_s
    if failure is not None:
        return CheckResult(
            CHECK_ID,
            None,
            Severity.CRITICAL,
            f"the store cannot write for {failure.for_s:.0f} s: "
            f"{failure.error}{lost} (status is served from memory)",
            reading.remedy,
        )
    if waiting_s is not None and waiting_s > reading.stuck_after_s:
        return CheckResult(
            CHECK_ID,
            None,
            Severity.CRITICAL,
            f"a store write has waited {waiting_s:.0f} s "
            f"(database locked or disk stalled){lost} (status is served from memory)",
            reading.remedy,
        )
    return CheckResult(CHECK_ID, None, Severity.OK, "the store writes")


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "history not written",
        "fleetd keeps the live picture in memory, but the history (events, samples, the "
        "alert outbox) cannot be written: disk full, or another process holds fleet.db.",
        "free disk space (df -h on the state dir) or stop the process holding fleet.db.",
    ),
    alert=Alert("StoreUnwritable", "History cannot be written"),
)
