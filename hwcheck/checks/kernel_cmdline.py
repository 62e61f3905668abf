"""``kernel_cmdline``: the kernel arguments the rig needs are on the running kernel's line.

``pci=`` (bridge windows for the 64 GB BAR1), the IOMMU settings P2P depends on, the
nouveau blacklist and ``nvidia.*`` options: the baseline keeps those present when it was
recorded. Missing from ``/proc/cmdline`` is critical, naming each argument (and what
stands in its place); missing from the default boot entry is a warning, because the next
reboot loses it.
"""

from __future__ import annotations

from collections.abc import Iterable

from hwcheck.checks import bar1, p2p
from hwcheck.checks.base import CheckInput
from hwcheck.checks.spec import Alert, CheckSpec, CheckText
from hwcheck.hostfacts.cmdline import missing_args
from hwcheck.model import CheckResult, Severity

CHECK_ID = "kernel_cmdline"
REMEDY = (
    "add {args} to the boot entry (GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub; "
    'or grubby --update-kernel=ALL --args="{args}") and reboot'
)


def _listed(missing: list[tuple[str, str | None]]) -> str:
    return ", ".join(
        arg if instead is None else f"{arg} (has {instead})" for arg, instead in missing
    )


def _args(missing: Iterable[tuple[str, str | None]]) -> str:
    return " ".join(arg for arg, _ in missing)


def check(inp: CheckInput) -> list[CheckResult]:
    """One rig-wide result (none where the host facts are not read)."""
    host = inp.host
    if host is None:
        return []
    required = inp.baseline.required_cmdline
    if required is None:
        return [CheckResult(CHECK_ID, None, Severity.OK, "no required kernel arguments recorded")]
    if host.cmdline is None:
        return [CheckResult(CHECK_ID, None, Severity.OK, "/proc/cmdline not readable here")]
    running_missing = missing_args(required, host.cmdline)
    if running_missing:
        return [
            CheckResult(
                CHECK_ID,
                None,
                Severity.CRITICAL,
                f"the running kernel lacks {_listed(running_missing)}",
                REMEDY.format(args=_args(running_missing)),
            )
        ]
    boot = host.default_boot
    if boot is not None and boot.args is not None:
        boot_missing = missing_args(required, boot.args)
        if boot_missing:
            return [
                CheckResult(
                    CHECK_ID,
                    None,
                    Severity.WARNING,
                    f"the next reboot boots without {_listed(boot_missing)} "
                    f"(default entry {boot.title or boot.kernel}, from {boot.source})",
                    REMEDY.format(args=_args(boot_missing)),
                )
            ]
    listed = " ".join(required) if required else "none"
    return [
        CheckResult(CHECK_ID, None, Severity.OK, f"required kernel arguments present: {listed}")
    ]


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "kernel arguments missing",
        "The baseline's kernel arguments that the driver and PCI setup depend on (pci= bridge "
        "windows, iommu, blacklists, NVreg options) are not on /proc/cmdline.",
        "add them to the boot entry (GRUB_CMDLINE_LINUX and update-grub, or grubby --args) "
        "and reboot.",
    ),
    alert=Alert("KernelArgsMissing", "Kernel arguments missing"),
    explains=frozenset({bar1.CHECK_ID, p2p.CHECK_ID}),
    gate=True,
    host_panel=True,
)
