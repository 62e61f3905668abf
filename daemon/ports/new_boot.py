"""A new boot while fleetd runs: every part that keeps per-boot state starts afresh.

The poll sees the boot id change (a real host cannot reboot under a running fleetd, the
simulated one can: ``POST /api/v1/sim/reboot``, a confirmed reboot under ``--simulate``).
The boot is recorded first (clearing the latch, ``daemon.rig.boot``), then the latch in
force, the monitor's Xids, the host watch, recovery's memory and the controller are told,
the kernel log of the new boot is followed, and the bring-up (``daemon.ports.bringup``)
runs on the recovery worker, unless fleetd is stopping.
"""

from __future__ import annotations

import logging
import threading

from daemon.engine.fleet import SideEngines
from daemon.ports.bringup import BringUp
from daemon.ports.latch import LatchState
from daemon.ports.parts import RecoveryMemory
from daemon.rig.boot import track_boot
from daemon.rig.host_watch import HostWatch
from daemon.rig.monitor import RigMonitor
from daemon.rig.xidpath import FollowerThread
from daemon.store import Store
from recovery.controller import RecoveryController

log = logging.getLogger("fleetd")


class NewBoot:
    """The reaction to a new boot id, for the poller and the simulated reboot."""

    def __init__(
        self,
        store: Store,
        latch_state: LatchState,
        monitor: RigMonitor,
        host_watch: HostWatch,
        recovery_memory: RecoveryMemory,
        recovery: RecoveryController,
        follower: FollowerThread,
        bring_up: BringUp,
        stop: threading.Event,
        *,
        others: SideEngines | None = None,
    ) -> None:
        self._store = store
        self._latch_state = latch_state
        self._monitor = monitor
        self._host_watch = host_watch
        self._recovery_memory = recovery_memory
        self._recovery = recovery
        self._follower = follower
        self._bring_up = bring_up
        self._stop = stop
        self._others = others  # [serving] run's other engines: told and brought up too

    def on_new_boot(self, boot_id: str) -> None:
        """The host rebooted while we ran (the simulated rig can): start a fresh boot."""
        log.warning("boot id changed to %s: the host rebooted", boot_id)
        self._follower.stop()
        self.begin_boot(boot_id)

    def begin_boot(self, boot_id: str) -> None:
        """Record the new boot (clearing the latch), count its Xids afresh, follow its log.

        The follower must be stopped; the bring-up then runs on the recovery worker.
        """
        track_boot(self._store, boot_id)
        self._latch_state.new_boot(boot_id)
        self._monitor.new_boot(boot_id)
        self._host_watch.new_boot()
        self._recovery_memory.new_boot()
        self._recovery.new_boot(boot_id)
        if self._others is not None:
            self._others.new_boot(boot_id)
        self._follower.start()
        self._recovery.submit(lambda: self._bring_up_now(boot_id))

    def _bring_up_now(self, boot_id: str) -> None:
        if not self._stop.is_set():
            self._bring_up.run(boot_id)
            if self._others is not None:
                self._others.bring_up()
