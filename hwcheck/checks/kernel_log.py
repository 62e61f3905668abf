"""``kernel_log``: is fleetd reading the kernel log? (rig-wide, from ``readings.kernel_log``)

While the follower is down no Xid is seen: the rig is blind. A warning while it is down
(with the error and how long), and one while records were lost to a ring-buffer overrun
this boot (an Xid may be among them); otherwise ok, naming the source and the last blind
spell of this boot. fleetd's follower keeps the reading (``daemon.rig.kernellog_health``).
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput
from hwcheck.checks.readings import KernelLogReading
from hwcheck.checks.spec import Alert, CheckSpec, CheckText
from hwcheck.model import CheckResult, Severity

CHECK_ID = "kernel_log"
REMEDY_DOWN = (
    "fleetd retries on its own from where it stopped; if it stays down, fix the error "
    "(disk full, database locked, journalctl missing) or restart fleetd"
)
REMEDY_LOST = (
    "records were overwritten before fleetd read them: check `dmesg | grep -i xid` by hand; "
    "a larger ring buffer (log_buf_len=4M on the kernel command line) avoids it"
)


def check(inp: CheckInput) -> list[CheckResult]:
    """The registry's entry: one rig-wide result when fleetd reads the kernel log."""
    reading = inp.readings.kernel_log
    return [] if reading is None else [judge(reading)]


def judge(reading: KernelLogReading) -> CheckResult:
    """The ``kernel_log`` result for one reading of the follower."""
    down, lost, last = reading.down, reading.lost_records, reading.last_spell
    if down is not None:
        return CheckResult(
            CHECK_ID,
            None,
            Severity.WARNING,
            f"kernel-log follower down since {down.clock()} ({down.length_s:.0f} s,"
            f" retrying): {down.error}; Xids are not seen meanwhile",
            REMEDY_DOWN,
        )
    if lost:
        return CheckResult(
            CHECK_ID,
            None,
            Severity.WARNING,
            f"{lost} kernel-log record(s) lost to a ring-buffer overrun this boot "
            "(an Xid among them was missed)",
            REMEDY_LOST,
        )
    message = f"following the kernel log ({reading.source})"
    if last is not None:
        message += f"; blind for {last.length_s:.0f} s from {last.clock()} ({last.error})"
    return CheckResult(CHECK_ID, None, Severity.OK, message)


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "kernel log unread",
        "fleetd reads Xids from the kernel log (/dev/kmsg); while its follower is down or "
        "records were lost to a ring-buffer overrun, an Xid can go unseen.",
        "fleetd retries on its own; fix the error it names, or restart fleetd; after an "
        "overrun read dmesg | grep -i xid by hand.",
    ),
    alert=Alert("KernelLogBlind", "Kernel-log follower down: Xids go unseen"),
)
