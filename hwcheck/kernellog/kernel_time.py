"""The kernel's own time of a record, as wall-clock time.

A ``/dev/kmsg`` record (and journald's ``_SOURCE_MONOTONIC_TIMESTAMP``) carries the
microseconds since boot at which the kernel printed it, on the monotonic clock. The
time fleetd stores an Xid at can be much later (30-62 s after a blind spell, issue 22),
so the record's own time is kept beside it: mapped to wall time at read as
``wall_now - (monotonic_now - usec)``. Mapped at read, not at boot, so a wall clock
stepped since (NTP at start-up) does not skew it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

USEC_PER_S = 1_000_000


def kernel_wall_time(
    usec: int | None,
    monotonic_now_s: float,
    wall_now: datetime,
) -> datetime | None:
    """When the kernel printed a record stamped ``usec``; None without a stamp.

    A stamp ahead of the clock (it cannot be, unless the clocks disagree) maps to now.
    """
    if usec is None or usec < 0:
        return None
    age_s = max(0.0, monotonic_now_s - usec / USEC_PER_S)
    return wall_now - timedelta(seconds=age_s)


def kernel_clock(
    monotonic_s: Callable[[], float],
    wall_now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Callable[[int | None], datetime | None]:
    """A mapper from record stamps to wall time over the host's kernel clock."""

    def mapped(usec: int | None) -> datetime | None:
        return kernel_wall_time(usec, monotonic_s(), wall_now())

    return mapped
