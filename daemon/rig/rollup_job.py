"""The rollup job: raw samples into 1-minute rollups, both windows pruned, on the writer.

``[store] raw_retention_h`` and ``rollup_retention_days`` say how long each is kept. The
24 h chart reads the rollups, so a job that rolled a minute drops the kept chart
documents (``daemon.rig.history_cache``): the new minute shows at once.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from daemon.config import StoreSettings
from daemon.rig.history_cache import HistoryCache
from daemon.store import Store


class RollupJob:
    """The scheduler's ``rollup`` job; its work runs on the store writer's thread."""

    def __init__(
        self,
        store: Store,
        defer: Callable[[Callable[[], None]], None],
        settings: StoreSettings,
        history: HistoryCache,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._store = store
        self._defer = defer
        self._settings = settings
        self._history = history
        self._wall_clock = wall_clock

    def rollup(self) -> None:
        """Roll raw samples into 1-minute rollups and prune both windows (a store job)."""
        self._defer(self._rollup_now)

    def _rollup_now(self) -> None:
        report = self._store.rollup_and_prune(
            self._wall_clock(),
            raw_retention_s=self._settings.raw_retention_h * 3600,
            rollup_retention_s=self._settings.rollup_retention_days * 86400,
        )
        if report.minutes_rolled:  # the 24 h chart reads rollups: a kept one is out of date
            self._history.rollups_changed()
