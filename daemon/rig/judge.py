"""The rig's one verdict, kept current: after each poll and each latch or engine change.

``hwcheck.verdict.judge`` says what the verdict is; this keeps its inputs the daemon
holds in memory (the check results in the monitor, the latch in force, the engine's
state) and stores each verdict in the monitor, where the status, ``STATUS=`` and
``/metrics`` read it. The latch is read from its one holder (``daemon.ports.latch``), in
memory: no reader waits on the store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from daemon.rig.monitor import RigMonitor
from daemon.store import Latch
from hwcheck.advice import RigNow
from hwcheck.verdict import FiringAlert, judge, rig_now


class RigJudge:
    """Judges the rig on what fleetd holds in memory (thread-safe: every part is)."""

    def __init__(
        self,
        monitor: RigMonitor,
        latch: Callable[[], Latch | None],
        engine_state: Callable[[], str | None],
        changed: Callable[[], None],
        profile_cards: Callable[[], frozenset[int] | None] = lambda: None,
        wrong_boot: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._latch = latch
        self._wrong_boot = wrong_boot
        self._monitor = monitor
        self._engine_state = engine_state
        self._profile_cards = profile_cards
        self._changed = changed
        self._alerts_lock = threading.Lock()
        self._alerts: tuple[FiringAlert, ...] = ()

    def rejudge(self) -> None:
        """The verdict on the last results, the latch and the engine, into the monitor."""
        results = self._monitor.view().results
        latch = self._latch()
        with self._alerts_lock:
            alerts = self._alerts
        verdict = judge(
            results,
            latch_reason=None if latch is None else latch.reason,
            engine_state=self._engine_state(),
            alerts=alerts,
        )
        self._monitor.set_verdict(verdict)

    def alerts_changed(self, firing: Sequence[FiringAlert]) -> None:
        """The alerts firing now (the alert engine's): the verdict shows each at its severity."""
        with self._alerts_lock:
            if tuple(firing) == self._alerts:
                return
            self._alerts = tuple(firing)
        self.rejudge()
        self._changed()

    def rig_now(self) -> RigNow:
        """How faults read now.

        Whether the engine runs, the latch (its rung and card), the profile's cards and a
        wrong default boot entry.
        """
        latch = self._latch()
        return rig_now(
            self._engine_state(),
            latch is not None,
            self._profile_cards(),
            latch_advice=None if latch is None else latch.advice,
            latch_card=None if latch is None else latch.card,
            wrong_boot=self._wrong_boot(),
        )

    def latch_changed(self, required: bool) -> None:
        """Recovery set or cleared the latch (its holder has it): the picture says so now."""
        self.rejudge()
        self._changed()
