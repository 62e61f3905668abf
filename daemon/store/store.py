"""``Store``: the daemon's one handle on its history, safe to share between threads.

The class only composes: each query module adds its methods as a mixin over
``db.Database`` (which owns the connection and the units of work), so a new query is
written once, in the module of the record it reads or writes. Methods that must be
atomic together (an Xid and the kernel-log cursor past it; check states and their
transition events; clearing the latch and its event) are single methods for that reason.
The functions that take a ``Session`` (``events.insert_event``, ``keyvalue.set_value``...)
are how store modules share one transaction; everything outside the store uses ``Store``.
"""

from __future__ import annotations

from sqlalchemy.exc import SQLAlchemyError

from daemon.store.alerts import AlertQueries
from daemon.store.audit import AuditQueries
from daemon.store.canaries import CanaryQueries
from daemon.store.db import StoreError, build_engines, mask_url, one_line_cause
from daemon.store.events import EventQueries
from daemon.store.keyvalue import KeyValueQueries
from daemon.store.launches import LaunchQueries
from daemon.store.memtests import MemtestQueries
from daemon.store.migrations import schema_version, upgrade
from daemon.store.outbox import OutboxQueries
from daemon.store.rollups import RollupQueries
from daemon.store.samples import SampleQueries
from daemon.store.xids import XidQueries


class Store(
    EventQueries,
    XidQueries,
    SampleQueries,
    RollupQueries,
    LaunchQueries,
    AuditQueries,
    KeyValueQueries,
    AlertQueries,
    OutboxQueries,
    CanaryQueries,
    MemtestQueries,
):
    """Events, samples, rollups, latch, launches, audit and alerts in one SQL database."""

    @classmethod
    def open(cls, url: str) -> Store:
        """Connect to ``url``, upgrade its schema to the newest, and return the store."""
        masked = mask_url(url)
        try:
            engines = build_engines(url)
        except StoreError as exc:
            raise StoreError(f"store {masked}: {exc}") from None
        try:
            upgrade(engines.write)
        except StoreError as exc:
            engines.read.dispose()
            raise StoreError(f"store {masked}: {exc}") from None
        except SQLAlchemyError as exc:
            engines.read.dispose()
            raise StoreError(f"store {masked}: {one_line_cause(exc)}") from None
        return cls(engines.read, engines.write, url)

    def schema_version(self) -> int:
        """The database's schema version."""
        with self.read() as session:
            return schema_version(session.connection())
