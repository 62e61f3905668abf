"""``driver_version``: the driver that is loaded is the one the library and the rig expect.

Every card reports the one system driver, so comparing cards alone never warns. What
really differs after an upgrade without a reboot is the user-space NVML library (new)
against the loaded kernel module (old): the next process to start, the engine included,
fails in ``cudaSetDevice``. A rig can also pin ``[rig] driver_version``; a driver other
than the pinned one (an unattended upgrade) is a warning too.
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput
from hwcheck.checks.spec import Alert, CheckSpec, CheckText
from hwcheck.driver_module import library_driver_version
from hwcheck.model import CheckResult, Severity

CHECK_ID = "driver_version"
REMEDY_HALF_DONE = (
    "a driver upgrade is half done: reboot the host to load one driver "
    "(or load the kernel module that matches the library)"
)


def _mixed_cards(inp: CheckInput) -> CheckResult | None:
    versions: dict[str, list[str]] = {}
    if inp.now.driver_version:
        versions.setdefault(inp.now.driver_version, []).append("system")
    for card in inp.live_cards():
        if card.driver_version:
            versions.setdefault(card.driver_version, []).append(f"card {card.index}")
    if len(versions) < 2:
        return None
    listed = "; ".join(f"{v}: {', '.join(who)}" for v, who in sorted(versions.items()))
    return CheckResult(
        CHECK_ID,
        None,
        Severity.WARNING,
        f"{len(versions)} driver versions reported ({listed})",
        REMEDY_HALF_DONE,
    )


def check(inp: CheckInput) -> list[CheckResult]:
    """One rig-wide result."""
    mixed = _mixed_cards(inp)
    if mixed is not None:
        return [mixed]
    library = library_driver_version(inp.now.nvml_version)
    module = inp.kernel_module_version
    driver = module or inp.now.driver_version or library
    if driver is None:
        return [
            CheckResult(
                CHECK_ID,
                None,
                Severity.WARNING,
                "driver version not available",
                "check that the nvidia driver is loaded (cat /proc/driver/nvidia/version)",
            )
        ]
    if library is not None and module is not None and library != module:
        return [
            CheckResult(
                CHECK_ID,
                None,
                Severity.WARNING,
                f"NVML library {library} but kernel module {module} loaded",
                REMEDY_HALF_DONE,
            )
        ]
    expected = inp.profile.driver_version
    if expected is not None and driver != expected:
        return [
            CheckResult(
                CHECK_ID,
                None,
                Severity.WARNING,
                f"driver {driver} loaded, this rig expects {expected} ([rig] driver_version)",
                f"install driver {expected} and reboot, or set [rig] driver_version = "
                f'"{driver}" if the upgrade was meant',
            )
        ]
    parts = [f"library {library}" if library else "", f"kernel module {module}" if module else ""]
    detail = ", ".join(p for p in parts if p)
    return [
        CheckResult(
            CHECK_ID, None, Severity.OK, f"driver {driver}" + (f" ({detail})" if detail else "")
        )
    ]


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "driver mismatch",
        "The NVML library and the loaded kernel module differ (an upgrade without a reboot), "
        "or the driver is not the one [rig] driver_version pins.",
        "reboot after a driver upgrade; install the pinned driver.",
    ),
    alert=Alert("DriverMismatch", "Driver mismatch"),
)
