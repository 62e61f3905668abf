"""``nvml``: whether NVML answers at all, and if not, why and what to do.

Without NVML nothing about the cards can be judged, which used to leave a bare
"UNKNOWN": after a kernel or driver upgrade the usual cause (driver not loaded, or a
library/kernel module mismatch) and its remedy are known, so they are a critical
result of their own.
"""

from __future__ import annotations

from hwcheck.backend import BackendUnavailable
from hwcheck.checks import card_count, card_lost, driver_version, persistence_mode
from hwcheck.checks.base import CheckInput
from hwcheck.checks.spec import Alert, CheckSpec, CheckText
from hwcheck.model import CheckResult, Severity

CHECK_ID = "nvml"


def check(inp: CheckInput) -> list[CheckResult]:
    """One rig-wide result: a snapshot was read, so NVML answers."""
    version = f" (NVML {inp.now.nvml_version})" if inp.now.nvml_version else ""
    return [CheckResult(CHECK_ID, None, Severity.OK, f"NVML answers{version}")]


def unavailable(exc: BackendUnavailable) -> CheckResult:
    """The critical result while NVML cannot be read: its reason and remedy."""
    remedy = exc.remedy or "check the NVIDIA driver (nvidia-smi, lsmod | grep nvidia)"
    return CheckResult(CHECK_ID, None, Severity.CRITICAL, str(exc), remedy)


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "NVML cannot start",
        "fleetd reads every card through NVML (libnvidia-ml). When it cannot start, nothing "
        "about the cards is known: the driver is not loaded, or the library and the kernel "
        "module differ after a driver upgrade without a reboot, or the driver does not answer.",
        "load the module (sudo modprobe nvidia) or reboot after a driver or kernel upgrade; "
        "nvidia-smi says the same thing in its own words.",
    ),
    alert=Alert("NvmlUnavailable", "NVML unavailable"),
    explains=frozenset(
        {
            card_count.CHECK_ID,
            card_lost.CHECK_ID,
            driver_version.CHECK_ID,
            persistence_mode.CHECK_ID,
        }
    ),
    gate=True,
)
