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
    previous = store.get_boot_id()
    if previous == boot_id:
        return False
    store.set_boot_id(boot_id)
    if previous is None:
        log.info("first start on this state dir (boot id %s)", boot_id)
        return False
    store.record_event("reboot", "info", f"host rebooted (boot id {previous} -> {boot_id})")
    if store.get_latch() is not None:
        store.clear_latch(reason="the host rebooted", by="fleetd", how="reboot")
        log.info("reboot-required latch cleared: the host rebooted")
    return True
