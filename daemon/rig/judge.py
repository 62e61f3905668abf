"""The rig's one verdict, kept current: after each poll and each latch or engine change.

``hwcheck.verdict.judge`` says what the verdict is; this keeps its inputs the daemon
holds in memory (the check results in the monitor, the latch in force, the engine's
state) and stores each verdict in the monitor, where the status, ``STATUS=`` and
``/metrics`` read it. The latch is read from its one holder (``daemon.ports.latch``), in
memory: no reader waits on the store.
"""

from __future__ import annotations

from collections.abc import Callable

from daemon.rig.monitor import RigMonitor
from daemon.store import Latch
from hwcheck.advice import RigNow
from hwcheck.verdict import judge, rig_now


class RigJudge:
    """Judges the rig on what fleetd holds in memory (thread-safe: every part is)."""

    def __init__(
        self,
        monitor: RigMonitor,
        latch: Callable[[], Latch | None],
        engine_state: Callable[[], str | None],
        changed: Callable[[], None],
        profile_cards: Callable[[], frozenset[int] | None] = lambda: None,
    ) -> None:
        self._latch = latch
        self._monitor = monitor
        self._engine_state = engine_state
        self._profile_cards = profile_cards
        self._changed = changed

    def rejudge(self) -> None:
        """The verdict on the last results, the latch and the engine, into the monitor."""
        results = self._monitor.view().results
        latch = self._latch()
        verdict = judge(
            results,
            latch_reason=None if latch is None else latch.reason,
            engine_state=self._engine_state(),
        )
        self._monitor.set_verdict(verdict)

    def rig_now(self) -> RigNow:
        """Whether the engine runs, the latch is set, the profile's cards: how faults read."""
        return rig_now(self._engine_state(), self._latch() is not None, self._profile_cards())

    def latch_changed(self, required: bool) -> None:
        """Recovery set or cleared the latch (its holder has it): the picture says so now."""
        self.rejudge()
        self._changed()
