"""What the store hands back and takes in: plain frozen dataclasses, no ORM objects.

Returning detached plain data keeps sessions short (one per unit of work) and lets the
API and the CLI serialise rows without a database session in reach.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hwcheck.model import ClassifiedXid, XidClass


class EventKind(enum.StrEnum):
    """What an event is about."""

    XID = "xid"
    CHECK = "check"
    SERVING = "serving"
    RECOVERY = "recovery"
    DAEMON = "daemon"
    REBOOT = "reboot"
    OPERATOR = "operator"
    LAUNCH = "launch"


class EventSeverity(enum.StrEnum):
    """How bad an event is (check severities plus ``info``)."""

    OK = "ok"
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class ChartResolution(enum.StrEnum):
    """Raw points, 1-minute buckets, or whichever suits the span (``auto``)."""

    AUTO = "auto"
    RAW = "raw"
    MINUTE = "1m"


@dataclass(frozen=True, slots=True)
class EventRow:
    """One stored event."""

    id: int
    ts: datetime
    kind: str
    severity: str
    message: str
    card: int | None = None
    card_uuid: str | None = None
    card_serial: str | None = None
    pci_bus_id: str | None = None
    xid: int | None = None
    details: dict[str, Any] | None = None
    boot_id: str | None = None
    kmsg_seq: int | None = None
    acked_at: datetime | None = None
    acked_by: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The CONTRACT's ``{id, ts, kind, card, xid, severity, message}`` plus extras."""
        return {
            "id": self.id,
            "ts": self.ts.isoformat(),
            "kind": self.kind,
            "card": self.card,
            "xid": self.xid,
            "severity": self.severity,
            "message": self.message,
            "uuid": self.card_uuid,
            "pci_bus_id": self.pci_bus_id,
            "acked_at": self.acked_at.isoformat() if self.acked_at else None,
            "acked_by": self.acked_by,
        }


_SEVERITY_BY_XID_CLASS = {
    XidClass.HARDWARE: EventSeverity.CRITICAL,
    XidClass.DRIVER: EventSeverity.CRITICAL,
    XidClass.APPLICATION: EventSeverity.WARNING,
    XidClass.UNKNOWN: EventSeverity.WARNING,
}


@dataclass(frozen=True, slots=True)
class XidRecord:
    """An Xid event to store; ``boot_id``+``kmsg_seq`` identify the kernel record."""

    ts: datetime
    xid: int
    message: str
    severity: EventSeverity = EventSeverity.WARNING
    card: int | None = None
    card_uuid: str | None = None
    pci_bus_id: str | None = None
    boot_id: str | None = None
    kmsg_seq: int | None = None
    details: dict[str, Any] | None = None

    @classmethod
    def from_classified(
        cls,
        classified: ClassifiedXid,
        ts: datetime,
        *,
        card: int | None = None,
        card_uuid: str | None = None,
        severity: EventSeverity | None = None,
        message: str | None = None,
    ) -> XidRecord:
        """Build the record from the parser's event and the catalogue's verdict.

        ``details`` keeps the kernel line and the driver's own message, so the event can
        be classified again later (``Store.xids_for_boot``) whatever ``message`` says.
        """
        event, info = classified.event, classified.info
        return cls(
            ts=ts,
            xid=event.xid,
            message=event.message if message is None else message,
            severity=_SEVERITY_BY_XID_CLASS[info.xid_class] if severity is None else severity,
            card=card,
            card_uuid=card_uuid,
            pci_bus_id=event.pci_bus_id,
            boot_id=event.boot_id,
            kmsg_seq=event.seq,
            details={
                "class": info.xid_class.value,
                "action": info.action.value,
                "explanation": info.explanation,
                "text": event.text,
                "xid_message": event.message,
                "pid": event.pid,
                "process": event.process,
            },
        )


@dataclass(frozen=True, slots=True)
class Latch:
    """The reboot-required latch: why, who set it, since when."""

    reason: str
    source: str
    since: datetime
    advice: str | None = None


@dataclass(frozen=True, slots=True)
class CardRow:
    """A card the store has seen."""

    uuid: str
    index: int
    pci_bus_id: str
    name: str
    serial: str | None
    first_seen: datetime
    last_seen: datetime


@dataclass(frozen=True, slots=True)
class CardMove:
    """A card (same UUID) found at another PCI address or index than last time."""

    uuid: str
    old_pci_bus_id: str
    new_pci_bus_id: str
    old_index: int
    new_index: int


@dataclass(frozen=True, slots=True)
class LaunchRow:
    """One engine launch as stored (environment secrets already masked)."""

    id: int
    started_at: datetime
    argv: list[str]
    env: dict[str, str]
    recipe_hash: str
    ready_at: datetime | None = None
    ended_at: datetime | None = None
    exit_code: int | None = None
    crash_class: str | None = None


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One audit-trail entry."""

    id: int
    ts: datetime
    actor: str
    action: str
    target: str | None
    reason: str | None
    dry_run: bool
    outcome: str
    details: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class MetricStat:
    """Min/avg/max of one metric over a chart point (all equal for a raw point)."""

    min: float
    avg: float
    max: float


@dataclass(frozen=True, slots=True)
class ChartPoint:
    """One point of a card's chart; a metric the card did not report is ``None``."""

    ts: datetime
    n: int
    power_draw_w: MetricStat | None
    temperature_c: MetricStat | None
    sm_clock_mhz: MetricStat | None
    memory_used_mib: MetricStat | None


@dataclass(frozen=True, slots=True)
class Chart:
    """A card's chart between two times, at the resolution actually used."""

    card_uuid: str
    since: datetime
    until: datetime
    resolution: ChartResolution
    points: list[ChartPoint]


@dataclass(frozen=True, slots=True)
class EngineSampleRow:
    """Engine metrics at one poll."""

    ts: datetime
    tokens_per_s: float | None
    requests_running: int | None
    requests_waiting: int | None
    kv_cache_usage_pct: float | None
