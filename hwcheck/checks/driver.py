"""``driver_version``: one driver version across the rig.

A mixed version cannot happen within one loaded kernel module, but a half-done driver
reload or upgrade can leave the cards reporting different ones: that is a warning that
asks for a reboot, not an incident in itself.
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput
from hwcheck.model import CheckResult, Severity

CHECK_ID = "driver_version"


def check(inp: CheckInput) -> list[CheckResult]:
    """One rig-wide result."""
    versions: dict[str, list[str]] = {}
    if inp.now.driver_version:
        versions.setdefault(inp.now.driver_version, []).append("system")
    for card in inp.live_cards():
        if card.driver_version:
            versions.setdefault(card.driver_version, []).append(f"card {card.index}")
    if not versions:
        return [
            CheckResult(
                CHECK_ID,
                None,
                Severity.WARNING,
                "driver version not available",
                "check that the nvidia driver is loaded (cat /proc/driver/nvidia/version)",
            )
        ]
    if len(versions) == 1:
        (only,) = versions
        return [CheckResult(CHECK_ID, None, Severity.OK, f"driver {only}")]
    listed = "; ".join(f"{v}: {', '.join(who)}" for v, who in sorted(versions.items()))
    return [
        CheckResult(
            CHECK_ID,
            None,
            Severity.WARNING,
            f"{len(versions)} driver versions reported ({listed})",
            "a driver upgrade or reload is half done: reboot the host to load one driver",
        )
    ]
