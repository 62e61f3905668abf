"""The rig's one verdict, kept current: after each poll and each latch or engine change.

``hwcheck.verdict.judge`` says what the verdict is; this keeps its inputs the daemon
holds in memory (the check results in the monitor, the latch as last read, the engine's
state) and stores each verdict in the monitor, where the status, ``STATUS=`` and
``/metrics`` read it. The latch mirror is refreshed from the store after every poll and
at once when recovery's executors set or clear the latch: no reader waits on the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from daemon.metrics_source import LatchMirror
from daemon.monitor import RigMonitor
from daemon.store import Store, StoreError
from hwcheck.advice import RigNow
from hwcheck.verdict import judge, rig_now

log = logging.getLogger("fleetd")


class RigJudge:
    """Judges the rig on what fleetd holds in memory (thread-safe: every part is)."""

    def __init__(
        self,
        monitor: RigMonitor,
        store: Store,
        engine_state: Callable[[], str | None],
        changed: Callable[[], None],
    ) -> None:
        self.latch = LatchMirror()
        self._monitor = monitor
        self._store = store
        self._engine_state = engine_state
        self._changed = changed

    def rejudge(self) -> None:
        """The verdict on the last results, the latch and the engine, into the monitor."""
        results = self._monitor.view().results
        verdict = judge(results, latch_reason=self.latch.reason, engine_state=self._engine_state())
        self._monitor.set_verdict(verdict)

    def rig_now(self) -> RigNow:
        """Whether the engine runs and the latch is set: the words of each fault's step."""
        return rig_now(self._engine_state(), self.latch.required)

    def mirror_latch(self) -> None:
        """Re-read the latch from the store (on the store writer's thread, after a poll)."""
        self.latch.set(self._store.get_latch())

    def latch_changed(self, required: bool) -> None:
        """Recovery's executors set or cleared the latch: the picture says so now."""
        try:
            self.latch.set(self._store.get_latch() if required else None)
        except StoreError as exc:  # the next poll's mirror tries again
            log.warning("the latch could not be read back: %s", exc)
        self.rejudge()
        self._changed()
