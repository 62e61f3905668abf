"""The Xid event path: journald without kernel seq, and a follower thread that never dies."""

from __future__ import annotations

import errno
import threading
from pathlib import Path

from daemon.rig.kernellog_health import MAX_PENDING_EVENTS, FollowerHealth, PendingEvent
from daemon.rig.monitor import RigMonitor
from daemon.rig.xidpath import FollowerThread, XidPath, journal_key
from daemon.store import Store
from hwcheck.checks import kernel_log as kernel_log_check
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.follower import XidFollower
from hwcheck.kernellog.records import KernelLogCursor, KernelRecord
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import load_scenario
from tests.support.waiting import wait_until
from tests.support.xid_path import BOOT, XID_TEXT, ReplayingSource, scripted_host


def journal_record(usec: int, text: str) -> KernelRecord:
    # What JournalctlSource yields: text, boot id, kernel timestamp, and no seq.
    return KernelRecord(text=text, seq=None, boot_id=BOOT, timestamp_usec=usec)


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


# --- the follower thread: restarts from its cursor, says when the rig was blind -----------


def kmsg(seq: int, text: str, prio: int = 4) -> bytes:
    return f"{prio},{seq},{seq * 1000},-;{text}\n".encode()


def test_the_follower_restarts_from_its_cursor_and_records_the_blind_spell(
    tmp_path: Path,
) -> None:
    ring = [kmsg(0, "Linux version"), kmsg(1, XID_TEXT), kmsg(2, "usb 1-1: new device")]
    # The first read ends at EAGAIN (fleetd's start); the follower's next read fails.
    first = [
        *ring,
        BlockingIOError(errno.EAGAIN, "again"),
        OSError(errno.EIO, "Input/output error"),
    ]
    second = [*ring, kmsg(3, XID_TEXT.replace("31,", "43,"))]
    host, cursors = scripted_host(tmp_path, [first, second])
    store = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    monitor = RigMonitor(BOOT, 3)
    changes: list[str] = []
    follower = FollowerThread(
        host,
        XidCatalogue(),
        store,
        XidPath(store, monitor, lambda _pci: 1),
        on_health_change=lambda: changes.append(
            kernel_log_check.judge(follower.health.reading()).severity.value
        ),
        backoff_base_s=0.05,
    )
    try:
        assert follower.start() == 1
        wait_until(lambda: len(monitor.xids()) == 2, 10, "the Xid after the restart")
        wait_until(lambda: changes[-1:] == ["ok"], 10, "the follower back")
        assert changes == ["warning", "ok"]
        assert cursors[0] is None
        assert cursors[1] == KernelLogCursor(BOOT, 2), "reopened after the last record handled"
        assert follower.alive()
        result = kernel_log_check.judge(follower.health.reading())
        assert (result.id, result.severity.value) == ("kernel_log", "ok")
        assert "blind for" in result.message and "Input/output error" in result.message
    finally:
        follower.stop()
    assert [e.xid for e in store.list_events(kind="xid")] == [43, 31], "each Xid once"
    daemon_events = [e.message for e in store.list_events(kind="daemon")]
    assert daemon_events[1].startswith("kernel-log follower down: KernelLogUnavailable: ")
    assert daemon_events[0].startswith("kernel-log follower back after ")
    assert store.get_cursor() == KernelLogCursor(BOOT, 3)
    store.close()


def test_records_lost_to_an_overrun_make_the_check_a_warning(tmp_path: Path) -> None:
    overrun = [kmsg(10, "a"), BrokenPipeError(errno.EPIPE, "Broken pipe"), kmsg(14, XID_TEXT)]
    host, _ = scripted_host(tmp_path, [overrun])
    store = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    follower = FollowerThread(
        host, XidCatalogue(), store, XidPath(store, RigMonitor(BOOT, 3), lambda _pci: 1)
    )
    try:
        assert follower.start() == 1
        result = kernel_log_check.judge(follower.health.reading())
        assert (result.severity.value, follower.lost_records) == ("warning", 3)
        assert result.message.startswith("3 kernel-log record(s) lost to a ring-buffer overrun")
        assert result.remedy is not None and "dmesg" in result.remedy
    finally:
        follower.stop()
        store.close()


def test_a_flapping_follower_queues_a_bounded_number_of_events() -> None:
    health = FollowerHealth()
    for attempt in range(120):
        assert health.went_down(f"journalctl exited ({attempt})")
        assert not health.went_down("again"), "still down: not a new spell"
        assert health.came_back("journal") is not None
    failing: list[str] = []

    def store_down(event: PendingEvent) -> None:
        failing.append(event.message)
        raise OSError("disk full")

    health.flush_events(store_down)
    assert len(failing) == 1, "the first failure stops the flush; the events stay queued"
    stored: list[PendingEvent] = []
    health.flush_events(stored.append)
    assert len(stored) == MAX_PENDING_EVENTS
    assert stored[-1].message.startswith("kernel-log follower back after ")
    assert stored[0].details["error"] == "journalctl exited (70)"
    health.flush_events(stored.append)
    assert len(stored) == MAX_PENDING_EVENTS


def test_an_xid_line_is_placed_on_the_card_at_its_address_in_the_latest_poll(
    tmp_path: Path,
) -> None:
    """The Xid line names a PCI address; the card index comes from the latest poll."""
    monitor = RigMonitor(BOOT, 3)
    assert monitor.card_index_of("0000:21:00.0") is None  # no poll yet
    rig = SimulatedRig(load_scenario("healthy"), tmp_path / "state")
    monitor.add_sample(rig.host_sources().gpu.snapshot())
    assert monitor.card_index_of("0000:21:00.0") == 1
    assert monitor.card_index_of("0000:99:00.0") is None
    assert monitor.card_index_of(None) is None


def test_a_deleted_store_gets_this_boots_xids_again_without_a_second_decision(
    tmp_path: Path,
) -> None:
    """After fleet.db was deleted at run time, a restart's ``xid_since_boot`` said "no Xid"
    beside a latch naming one (issue 33): the new file gets this boot's Xids back from the
    kernel log, keyed by their records, and recovery hears of none of them again."""
    ring = [kmsg(0, "Linux version"), kmsg(1, XID_TEXT), BlockingIOError(errno.EAGAIN, "")]
    later = [*ring[:2], kmsg(2, XID_TEXT.replace("31,", "43,")), ring[-1]]
    host, cursors = scripted_host(tmp_path, [ring, later, later])
    db = tmp_path / "fleet.db"
    store = Store.open(f"sqlite:///{db}")
    monitor = RigMonitor(BOOT, 3)
    decided: list[int] = []
    path = XidPath(
        store, monitor, lambda _pci: 1, [lambda item, _card: decided.append(item.event.xid)]
    )
    follower = FollowerThread(host, XidCatalogue(), store, path)
    try:
        assert follower.start() == 1
        assert decided == [31]
        db.unlink()
        store.record_event("daemon", "info", "the first write after the delete")
        wait_until(
            lambda: [e.xid for e in store.list_events(kind="xid")] == [43, 31],
            10,
            "this boot's Xids in the new file",
        )
        assert cursors[-1] is None  # read from the boot's start
        assert decided == [31]  # stored, not announced: 43 is the live follower's to tell
        assert store.get_cursor() is None  # the live follower's cursor is left to it
    finally:
        follower.stop()
        store.close()
