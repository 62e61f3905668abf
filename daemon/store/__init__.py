"""fleetd's durable history: events, samples and rollups, latch, launches, audit.

``Store.open(url)`` takes any SQLAlchemy URL (``sqlite:///path/fleet.db`` by default,
``postgresql+psycopg://...``), upgrades the schema, and is then shared by every thread.
"""

from daemon.store.errors import StoreError, StoreInputError, mask_url
from daemon.store.latch import ClearHow
from daemon.store.migrations import LATEST_VERSION, MIGRATIONS
from daemon.store.rollups import (
    DEFAULT_RAW_RETENTION_S,
    DEFAULT_ROLLUP_RETENTION_S,
    PruneReport,
)
from daemon.store.rows import (
    AuditRow,
    CardMove,
    CardRow,
    Chart,
    ChartPoint,
    ChartResolution,
    EngineSampleRow,
    EventKind,
    EventRow,
    EventSeverity,
    Latch,
    LaunchRow,
    MetricStat,
    XidRecord,
)
from daemon.store.store import Store
from serving.recipe.masking import mask_argv, mask_env

__all__ = [
    "DEFAULT_RAW_RETENTION_S",
    "DEFAULT_ROLLUP_RETENTION_S",
    "LATEST_VERSION",
    "MIGRATIONS",
    "AuditRow",
    "CardMove",
    "CardRow",
    "Chart",
    "ChartPoint",
    "ChartResolution",
    "ClearHow",
    "EngineSampleRow",
    "EventKind",
    "EventRow",
    "EventSeverity",
    "Latch",
    "LaunchRow",
    "MetricStat",
    "PruneReport",
    "Store",
    "StoreError",
    "StoreInputError",
    "XidRecord",
    "mask_argv",
    "mask_env",
    "mask_url",
]
