"""``reboot_command``: the host's reboot (and power-cycle) program must exist here.

A monitoring daemon that refused to start because ``[recovery] reboot_command`` names a
program this host lacks (``systemctl`` on a host without systemd) would watch nothing:
fleetd starts, this check warns naming the key and the program, and ``fleetctl reboot
--confirm`` refuses with the same reason until the key is fixed. Under ``--simulate`` no
host command ever runs, so there is no reading and no result.
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput
from hwcheck.checks.spec import Alert, CheckSpec, CheckText
from hwcheck.model import CheckResult, Severity

CHECK_ID = "reboot_command"
REMEDY = (
    'set the key to a command this host has (e.g. reboot_command = ["shutdown", "-r", "now"]), '
    "then restart fleetd; fleetd watches the rig meanwhile"
)


def check(inp: CheckInput) -> list[CheckResult]:
    """One rig-wide result from ``readings.host_commands`` (none without the reading)."""
    reading = inp.readings.host_commands
    if reading is None:
        return []
    if not reading.missing:
        return [CheckResult(CHECK_ID, None, Severity.OK, f"{reading.reboot} is here")]
    message = "; ".join(reading.missing) + ": fleetctl reboot --confirm cannot run it"
    return [CheckResult(CHECK_ID, None, Severity.WARNING, message, REMEDY)]


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "reboot program missing",
        "[recovery] reboot_command (or power_cycle_command) names a program this host does "
        "not have (systemctl on a host without systemd): fleetd still starts and watches, but "
        "a confirmed reboot cannot run it and is refused with the same words.",
        'set the key to a command this host has (e.g. ["shutdown", "-r", "now"]), then '
        "restart fleetd.",
    ),
    alert=Alert("RebootCommandMissing", "Reboot command missing"),
)
