"""``host_kernel``: the rig runs its baseline kernel, and the next reboot boots it too.

The bridge-window fix for a 64 GB BAR1 behind PLX switches lives in a patched kernel. An
unrelated package install can pull in a stock kernel and make it the default entry: the
rig runs on until the next reboot comes up with no 64 GB BAR1 and no P2P, which looks like
a hang at NCCL init. So a running kernel other than the baseline is critical, and a
default boot entry other than the running kernel is a warning naming what the next
reboot boots, while there is still time to fix it.
"""

from __future__ import annotations

from hwcheck.checks import bar1, clocks, driver_module, kernel_cmdline, p2p, vram_unlocked
from hwcheck.checks.base import CheckInput
from hwcheck.checks.spec import Alert, CheckSpec, CheckText, DrawnAt
from hwcheck.model import CheckResult, Severity

CHECK_ID = "host_kernel"
NO_BASELINE = "no host baseline recorded (fleetctl init records one; so does fleetd's first start)"


def set_default_remedy(release: str) -> str:
    """How to make ``release`` the default boot entry again, on both bootloader families."""
    return (
        f"make {release} the default boot entry again (grubby --set-default "
        f"/boot/vmlinuz-{release}; on Debian/Ubuntu grub-set-default with GRUB_DEFAULT=saved, "
        "then update-grub) and hold the kernel packages so an install cannot change it"
    )


def check(inp: CheckInput) -> list[CheckResult]:
    """One rig-wide result (none where the host facts are not read)."""
    host = inp.host
    if host is None:
        return []
    running = host.running_kernel
    expected = inp.baseline.kernel_release
    if running is None:
        return [CheckResult(CHECK_ID, None, Severity.OK, "running kernel not readable here")]
    if expected is not None and running != expected:
        return [
            CheckResult(
                CHECK_ID,
                None,
                Severity.CRITICAL,
                f"running kernel {running}, not the baseline {expected}: the rig booted "
                "another kernel (without the baseline's patches the 64 GB BAR1 and P2P can "
                "be gone)",
                f"reboot into {expected}: {set_default_remedy(expected)}; if {running} is "
                f'meant, record it (fleetctl init --force, or [host] kernel_release = "{running}")',
            )
        ]
    boot = host.default_boot
    if boot is not None and boot.kernel is not None and boot.kernel != running:
        title = f" (entry {boot.title!r}, from {boot.source})" if boot.title else ""
        return [
            CheckResult(
                CHECK_ID,
                None,
                Severity.WARNING,
                f"the next reboot boots {boot.kernel}{title}, not the running {running}: "
                "a package install changed the default boot entry",
                set_default_remedy(running),
            )
        ]
    known = "" if expected is not None else f"; {NO_BASELINE}"
    if boot is None or boot.kernel is None:
        return [
            CheckResult(
                CHECK_ID,
                None,
                Severity.OK,
                f"running kernel {running}; the default boot entry is unknown here{known}",
            )
        ]
    return [
        CheckResult(
            CHECK_ID,
            None,
            Severity.OK,
            f"running kernel {running}, and the next reboot boots it ({boot.source}){known}",
        )
    ]


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "another kernel",
        "The rig booted a kernel other than its baseline. Without the baseline's patches the "
        "64 GB BAR1 (bridge-window patch) and P2P are gone and the unlock module may not "
        "load: an unrelated package install can make a stock kernel the default.",
        "boot the baseline kernel and make it the default again (grubby --set-default, "
        "grub-set-default), hold the kernel packages; or record the new one (fleetctl init).",
    ),
    alert=Alert("HostKernelDrift", "Not the baseline kernel"),
    explains=frozenset(
        {
            bar1.CHECK_ID,
            clocks.CHECK_ID,
            driver_module.CHECK_ID,
            kernel_cmdline.CHECK_ID,
            p2p.CHECK_ID,
            vram_unlocked.CHECK_ID,
        }
    ),
    gate=True,
    host_panel=True,
    drawn_at=DrawnAt.HOST_KERNEL,
)
