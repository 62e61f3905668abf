"""fleetd's durable history: events, samples and rollups, latch, launches, audit.

``Store.open(url)`` takes any SQLAlchemy URL (``sqlite:///path/fleet.db`` by default,
``postgresql+psycopg://...``), upgrades the schema, and is then shared by every thread.
Its methods return the row types below: frozen dataclasses built once from the ORM
object, serialised by ``to_dict()``. Severities and event kinds are
``hwcheck.model.Severity`` and ``hwcheck.model.EventKind``.
"""

from daemon.store.audit import AuditRow
from daemon.store.builds import BuildRow, BuildVerdict
from daemon.store.canaries import CanaryRow
from daemon.store.db import StoreError, StoreInputError, mask_url
from daemon.store.events import EventRow
from daemon.store.keyvalue import ClearHow, Latch
from daemon.store.launches import LaunchRow
from daemon.store.migrations import LATEST_VERSION, MIGRATIONS
from daemon.store.models import StoredRow
from daemon.store.rollups import (
    DEFAULT_RAW_RETENTION_S,
    DEFAULT_ROLLUP_RETENTION_S,
    Chart,
    ChartPoint,
    ChartResolution,
    MetricStat,
    PruneReport,
)
from daemon.store.samples import CardMove, CardRow, EngineSampleRow
from daemon.store.store import Store
from daemon.store.xids import XidRecord

__all__ = [
    "DEFAULT_RAW_RETENTION_S",
    "DEFAULT_ROLLUP_RETENTION_S",
    "LATEST_VERSION",
    "MIGRATIONS",
    "AuditRow",
    "BuildRow",
    "BuildVerdict",
    "CanaryRow",
    "CardMove",
    "CardRow",
    "Chart",
    "ChartPoint",
    "ChartResolution",
    "ClearHow",
    "EngineSampleRow",
    "EventRow",
    "Latch",
    "LaunchRow",
    "MetricStat",
    "PruneReport",
    "Store",
    "StoreError",
    "StoreInputError",
    "StoredRow",
    "XidRecord",
    "mask_url",
]
