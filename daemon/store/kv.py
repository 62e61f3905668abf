"""Small durable values in the ``kv`` table, read and written inside a caller's session.

Everything here takes an open ``Session`` so a value can change in the same transaction
as the rows it belongs with (the kernel-log cursor with the Xid it moved past, the check
states with the transition events).
"""

from __future__ import annotations

import zlib
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, select, text
from sqlalchemy.orm import Session

from daemon.store.dialect import upsert
from daemon.store.schema import KvEntry

KERNEL_LOG_CURSOR = "kernel_log_cursor"
LAST_BOOT_ID = "last_boot_id"
REBOOT_LATCH = "reboot_latch"
CHECK_SEVERITIES = "check_severities"
SERVING_STATE = "serving_state"
ROLLUP_WATERMARK = "rollup_watermark"


def get_value(session: Session, key: str) -> Any | None:
    """The JSON value stored under ``key``, or ``None``."""
    return session.execute(select(KvEntry.value).where(KvEntry.key == key)).scalar_one_or_none()


def set_value(session: Session, key: str, value: Any, now: datetime | None = None) -> None:
    """Store ``value`` (JSON-serialisable) under ``key``, replacing what was there."""
    upsert(
        session,
        KvEntry.__table__,  # type: ignore[arg-type]
        {"key": key, "value": value, "updated_at": now or datetime.now(UTC)},
        ["key"],
    )


def delete_value(session: Session, key: str) -> bool:
    """Remove ``key``; True when it was there."""
    result = session.execute(delete(KvEntry).where(KvEntry.key == key))
    return bool(result.rowcount)  # type: ignore[attr-defined]


def lock_key(session: Session, key: str) -> None:
    """Serialise read-modify-write of ``key`` across connections until commit.

    SQLite write transactions already begin ``IMMEDIATE`` (one writer at a time); on
    PostgreSQL a transaction-scoped advisory lock does the same for this key only.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            text("SELECT pg_advisory_xact_lock(:key)"), {"key": zlib.crc32(key.encode())}
        )
