"""fleetd's main loop: watchdog pings only while healthy, one log line per change.

systemd restarts a ``Type=notify`` service whose ``WATCHDOG=1`` stops coming, so the ping
is withheld exactly when a restart would help: polls stopped, the API thread gone, a
background thread crashed (``hwcheck.threads.CrashBoard``), or the kernel-log follower
down for longer than ``[poll] kernel_log_down_watchdog_s``. After each poll one
``STATUS=`` line says the verdict the status serves (``StatusLine``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from daemon.api.server import ApiServer
from daemon.config import PollSettings
from daemon.rig.monitor import RigMonitor
from daemon.rig.status_document import view_verdict
from daemon.rig.xidpath import FollowerThread
from daemon.sdnotify import Notifier
from hwcheck.threads import CrashBoard

log = logging.getLogger("fleetd")


class StatusLine:
    """One line for ``STATUS=`` and the logs: the verdict the status serves."""

    def __init__(
        self, monitor: RigMonitor, serving_state: Callable[[], str], notifier: Notifier
    ) -> None:
        self._monitor = monitor
        self._serving_state = serving_state
        self._notifier = notifier

    def summary(self) -> str:
        """``2 cards ok; engine ready; 0 Xid since boot``."""
        view = self._monitor.view()
        latest = view.latest
        cards = len(latest.cards) if latest else 0
        overall = view_verdict(view).overall
        serving = self._serving_state()
        return f"{cards} cards {overall}; engine {serving}; {len(view.xids)} Xid since boot"

    def polled(self) -> None:
        """After each poll (its verdict judged): the line systemd shows."""
        self._notifier.status(self.summary())


class ServiceLoop:
    """The watchdog and staleness loop ``Daemon.run`` hands the main thread to."""

    def __init__(
        self,
        monitor: RigMonitor,
        api: ApiServer,
        follower: FollowerThread,
        poll: PollSettings,
        notifier: Notifier,
        stop: threading.Event,
        crashes: CrashBoard | None = None,
    ) -> None:
        self._monitor = monitor
        self._api = api
        self._follower = follower
        self._poll = poll
        self._notifier = notifier
        self._stop = stop
        self._crashes = crashes or CrashBoard()

    def unhealthy_reason(self) -> str | None:
        """Why WATCHDOG=1 is withheld (so systemd restarts fleetd), or None when healthy.

        A kernel-log follower down for longer than ``[poll] kernel_log_down_watchdog_s``
        (0: never) counts: it retries on its own, so a spell that long needs a restart.
        """
        age_s = self._monitor.last_attempt_age_s()
        limit_s = max(30.0, 5 * self._poll.interval_s + self._poll.nvml_timeout_s)
        if not self._api.alive():
            return "the API thread is not running"
        crash = self._crashes.first()
        if crash is not None:
            return f"the {crash.name} thread crashed ({crash.error})"
        if age_s is None or age_s >= limit_s:
            return "polls stopped"
        down_for_s = self._follower.health.down_for_s()
        watchdog_s = self._poll.kernel_log_down_watchdog_s
        if down_for_s is not None and watchdog_s > 0 and down_for_s > watchdog_s:
            return f"the kernel-log follower has been down for {down_for_s:.0f} s"
        return None

    def run(self) -> None:
        """Main loop: watchdog pings (only while healthy) until a stop is requested."""
        interval_s = self._notifier.watchdog_interval_s
        tick_s = min(interval_s, 1.0) if interval_s else 1.0
        next_ping_s = time.monotonic()
        stale_logged = False
        withheld_for: str | None = None
        while not self._stop.wait(tick_s):
            stale = self._monitor.view().stale_reason
            if (stale is not None) != stale_logged:  # one line when it goes stale, one back
                if stale is not None:
                    log.error("status is UNKNOWN: %s", stale)
                else:
                    log.warning("fresh readings again: status is judged again")
                stale_logged = stale is not None
            if interval_s is not None and time.monotonic() >= next_ping_s:
                reason = self.unhealthy_reason()
                if reason is None:
                    self._notifier.watchdog()
                    withheld_for = None
                elif reason != withheld_for:  # one line per reason, not per tick
                    log.error("unhealthy (%s): withholding the watchdog ping", reason)
                    withheld_for = reason
                next_ping_s = time.monotonic() + interval_s


STARTUP_SAMPLE_GAP_S = 0.5


def sample_until_judged(
    monitor: RigMonitor, poll: Callable[[], None], needed: int, stop: threading.Event
) -> None:
    """Poll until ``needed`` samples exist (at most ``2 * needed`` tries), or a stop.

    A power brake is only critical when seen in ``brake_sustained_samples`` samples in a
    row: without them, an autostart would launch the engine on braked cards.
    """
    for _ in range(2 * needed):
        if len(monitor.view().samples) >= needed or stop.is_set():
            return
        stop.wait(STARTUP_SAMPLE_GAP_S)
        try:
            poll()
        except Exception as exc:
            log.error("poll failed: %s; fleetd keeps running and retries", exc)
