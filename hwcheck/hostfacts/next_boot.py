"""What the next reboot would boot, when it is not the kernel this rig is known to work on.

A package install can make a stock kernel the default boot entry while the rig runs on;
a reboot then comes up with a 256 MiB BAR1 and no P2P. ``host_kernel`` warns about it as
a check; a reboot a person confirms must say it first and not walk into it (``fleetctl
reboot --confirm`` refuses until the entry is fixed, or ``--force``). Pure: facts and the
baseline in, one line out.
"""

from __future__ import annotations

from hwcheck.hostfacts.baseline import HostBaseline
from hwcheck.hostfacts.model import HostFacts


def wrong_next_boot(facts: HostFacts | None, baseline: HostBaseline) -> str | None:
    """The default boot entry in words when it is not the baseline kernel; None otherwise.

    The baseline's ``kernel_release`` is the known-good kernel (the running one when none
    is recorded); an entry whose kernel cannot be read is not judged.
    """
    if facts is None or facts.default_boot is None or facts.default_boot.kernel is None:
        return None
    expected = baseline.kernel_release or facts.running_kernel
    entry = facts.default_boot
    if expected is None or entry.kernel == expected:
        return None
    title = f" (entry {entry.title!r}, from {entry.source})" if entry.title else ""
    return (
        f"the default boot entry boots {entry.kernel}{title}, not the baseline kernel "
        f"{expected}: the next boot would come up without the baseline's patches (BAR1 and "
        "P2P can be gone)"
    )
