"""The Xid event path with a journald source: no kernel seq, yet no double counting."""

from __future__ import annotations

import threading
from pathlib import Path

from daemon.monitor import RigMonitor
from daemon.store import Store
from daemon.xidpath import XidPath, journal_key
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.follower import XidFollower
from hwcheck.kernellog.records import KernelRecord

BOOT = "5f0c0b6e-1c59-4b59-9d43-2c7b3a1f8e11"


def journal_record(usec: int, text: str) -> KernelRecord:
    # What JournalctlSource yields: text, boot id, kernel timestamp, and no seq.
    return KernelRecord(text=text, seq=None, boot_id=BOOT, timestamp_usec=usec)


class ReplayingSource:
    """A journald-like source that hands back the whole boot every time it is opened."""

    name = "journal"
    lost_records = 0

    def __init__(self, records: list[KernelRecord]) -> None:
        self._records = records
        self._given = False

    def read_available(self) -> list[KernelRecord]:
        if self._given:
            return []
        self._given = True
        return list(self._records)

    def wait(self, timeout_s: float) -> bool:
        return False

    def close(self) -> None:
        pass


def test_journal_records_are_stored_once_across_restarts(tmp_path: Path) -> None:
    records = [
        journal_record(5_140_900, "NVRM: Xid (PCI:0000:01:00): 31, pid=7, name=python3, MMU Fault"),
        journal_record(5_140_901, "some unrelated kernel line"),
        journal_record(5_140_900, "NVRM: Xid (PCI:0000:21:00): 31, pid=7, name=python3, MMU Fault"),
    ]
    store = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    catalogue = XidCatalogue()
    try:
        for _ in range(3):  # the first start and two restarts, each re-reading the boot
            monitor = RigMonitor(BOOT, 3)
            path = XidPath(store, monitor, lambda _pci: None)
            XidFollower(ReplayingSource(records), catalogue, path.handle, threading.Event()).drain()
        stored = store.list_events(kind="xid", limit=100)
        assert len(stored) == 2, "two distinct Xids, even at the same microsecond"
        assert sorted(e.pci_bus_id or "" for e in stored) == ["0000:01:00.0", "0000:21:00.0"]
    finally:
        store.close()


def test_journal_key_is_negative_and_only_for_seqless_records() -> None:
    assert journal_key(KernelRecord(text="x", seq=12, boot_id=BOOT, timestamp_usec=5)) is None
    assert journal_key(KernelRecord(text="x", seq=None, boot_id=BOOT)) is None
    key = journal_key(journal_record(1, "x"))
    assert key is not None and key < 0
