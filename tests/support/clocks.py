"""Stand-ins for the rig's two clocks: the monotonic and the wall clock are real boundaries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class ManualClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self, start_s: float = 5000.0) -> None:
        self.now_s = start_s

    def __call__(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> None:
        self.now_s += seconds


class ManualWallClock:
    """A UTC wall clock that moves only when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 9, 29, 13, 45, 55, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
