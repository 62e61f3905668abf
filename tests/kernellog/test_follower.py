"""XidFollower over a real kernel-log file written by KmsgFileWriter."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.filelog import FileSource, KmsgFileWriter
from hwcheck.kernellog.follower import XidFollower
from hwcheck.kernellog.kmsg_format import format_xid_text
from hwcheck.kernellog.records import KernelLogCursor, KernelRecord
from hwcheck.model import ClassifiedXid, XidAction, XidClass

BOOT = "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
DEADLINE_S = 10.0


class Collector:
    """The daemon's callback stand-in: records what it was given, can be told to fail once."""

    def __init__(self) -> None:
        self.events: list[tuple[ClassifiedXid, KernelRecord]] = []
        self.fail_on_xid: int | None = None
        self.changed = threading.Condition()

    def __call__(self, found: ClassifiedXid, record: KernelRecord) -> None:
        if found.event.xid == self.fail_on_xid:
            self.fail_on_xid = None
            raise RuntimeError("store is down")
        with self.changed:
            self.events.append((found, record))
            self.changed.notify_all()

    def wait_for(self, count: int) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: len(self.events) >= count, DEADLINE_S):
                pytest.fail(f"got {len(self.events)} of {count} Xid events")


def _boot_log(writer: KmsgFileWriter) -> None:
    writer.append("Linux version 6.1.0-27-amd64", prio=6)
    writer.append("NVRM: GPU at PCI:0000:01:00: GPU-3a7d1b2c-4e5f-6789-abcd-ef0123456789", prio=6)
    writer.append(format_xid_text("0000:01:00.0", 13, "Graphics Exception", 4242, "python3"))
    writer.append("usb 1-1: new high-speed USB device", prio=6)


def test_drain_classifies_and_tracks_the_cursor(tmp_path: Path) -> None:
    writer = KmsgFileWriter(tmp_path / "kmsg", BOOT)
    _boot_log(writer)
    collector = Collector()
    source = FileSource(tmp_path / "kmsg", None, BOOT)
    follower = XidFollower(source, XidCatalogue(), collector, threading.Event())
    found = follower.drain()
    assert len(found) == 1
    classified, record = collector.events[0]
    assert found[0] == classified
    event = classified.event
    assert (event.xid, event.pci_bus_id, event.pid, event.process, event.seq, event.boot_id) == (
        13,
        "0000:01:00.0",
        4242,
        "python3",
        2,
        BOOT,
    )
    assert (classified.info.xid_class, classified.info.action) == (
        XidClass.APPLICATION,
        XidAction.RESTART_ENGINE,
    )
    assert record.seq == 2
    # Records without an Xid move the cursor too.
    assert follower.last_cursor == KernelLogCursor(BOOT, 3)
    assert follower.gpu_uuids == {"0000:01:00.0": "GPU-3a7d1b2c-4e5f-6789-abcd-ef0123456789"}
    assert follower.drain() == []
    source.close()


def test_a_failing_callback_does_not_advance_the_cursor(tmp_path: Path) -> None:
    writer = KmsgFileWriter(tmp_path / "kmsg", BOOT)
    _boot_log(writer)
    collector = Collector()
    collector.fail_on_xid = 13
    source = FileSource(tmp_path / "kmsg", None, BOOT)
    follower = XidFollower(source, XidCatalogue(), collector, threading.Event())
    with pytest.raises(RuntimeError, match="store is down"):
        follower.drain()
    assert follower.last_cursor == KernelLogCursor(BOOT, 1)
    source.close()
    # Resuming from the persisted cursor delivers the failed event again, once.
    retry = FileSource(tmp_path / "kmsg", follower.last_cursor, BOOT)
    again = XidFollower(
        retry, XidCatalogue(), collector, threading.Event(), cursor=follower.last_cursor
    )
    assert [c.event.seq for c in again.drain()] == [2]
    assert again.last_cursor == KernelLogCursor(BOOT, 3)
    retry.close()


def test_run_follows_live_and_a_restart_resumes_without_repeats(tmp_path: Path) -> None:
    path = tmp_path / "kmsg"
    writer = KmsgFileWriter(path, BOOT)
    _boot_log(writer)
    collector = Collector()
    stop = threading.Event()
    source = FileSource(path, None, BOOT, poll_interval_s=0.01)
    follower = XidFollower(source, XidCatalogue(), collector, stop, wait_s=0.05)
    thread = threading.Thread(target=follower.run, daemon=True)
    thread.start()
    try:
        collector.wait_for(1)
        writer.append(format_xid_text("0000:02:00.0", 31, "Ch 00000008, intr 00000000.", 7, "vllm"))
        collector.wait_for(2)
    finally:
        stop.set()
        thread.join(DEADLINE_S)
        source.close()
    assert not thread.is_alive()
    second = collector.events[1][0]
    assert (second.event.xid, second.event.seq, second.info.xid_class) == (31, 4, XidClass.HARDWARE)
    cursor = follower.last_cursor
    assert cursor == KernelLogCursor(BOOT, 4)

    # "Daemon restart": a new follower from the persisted cursor sees only what is new.
    writer.append(format_xid_text("0000:03:00.0", 79, "GPU has fallen off the bus."))
    later = Collector()
    resumed_source = FileSource(path, cursor, BOOT)
    resumed = XidFollower(resumed_source, XidCatalogue(), later, threading.Event(), cursor=cursor)
    assert resumed.last_cursor == cursor
    assert [c.event.xid for c in resumed.drain()] == [79]
    assert resumed.last_cursor == KernelLogCursor(BOOT, 5)
    resumed_source.close()


def test_run_returns_at_once_when_already_stopped(tmp_path: Path) -> None:
    stop = threading.Event()
    stop.set()
    source = FileSource(tmp_path / "none", None, BOOT)
    follower = XidFollower(source, XidCatalogue(), Collector(), stop)
    follower.run()
    assert follower.last_cursor is None
    source.close()


def test_records_written_from_user_space_are_not_xids() -> None:
    """The recorded kmsg log holds one Xid line a root process wrote (prio 12: user.warning)."""
    data = Path(__file__).resolve().parent / "data" / "kmsg.log"
    planted = [line for line in data.read_text().splitlines() if line.startswith("12,")]
    assert len(planted) == 1 and "NVRM: Xid (" in planted[0]
    collector = Collector()
    source = FileSource(data, None, BOOT)
    try:
        XidFollower(source, XidCatalogue(), collector, threading.Event()).drain()
    finally:
        source.close()
    kernel_xids = [
        line
        for line in data.read_text().splitlines()
        if "NVRM: Xid (" in line and line.split(",", 1)[0].isdigit() and int(line.split(",")[0]) < 8
    ]
    assert len(kernel_xids) >= 2
    assert sorted(r.seq or 0 for _, r in collector.events) == sorted(
        int(line.split(",")[1]) for line in kernel_xids
    )
    assert all(r.facility == 0 for _, r in collector.events)
