"""Boot tracking: is this the boot we saw last time, or did the host really reboot?

The stored boot id is compared with ``/proc/sys/kernel/random/boot_id`` (or the simulated
one). A change is recorded as an event and clears the reboot-required latch: a real
reboot is the only automatic way the latch ever clears.
"""

from __future__ import annotations

import logging

from daemon.store import Store

log = logging.getLogger("fleetd.boot")


def track_boot(store: Store, boot_id: str) -> bool:
    """Record ``boot_id``; True when it differs from the stored one (the host rebooted)."""
    first = store.get_boot_id() is None
    previous = store.record_boot(boot_id)
    if first:
        log.info("first start on this state dir (boot id %s)", boot_id)
    if previous is None:
        return False
    log.info(
        "the host rebooted (boot id %s -> %s); any reboot-required latch is cleared",
        previous,
        boot_id,
    )
    return True
