"""KmsgSource on the real /dev/kmsg (as root), and its gap counting at the kernel's read."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from hwcheck.bootid import read_boot_id
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.errors import KernelLogUnavailable
from hwcheck.kernellog.follower import XidFollower
from hwcheck.kernellog.history import read_kmsg_history
from hwcheck.kernellog.kmsg import KmsgSource
from hwcheck.kernellog.parser import parse_xid
from hwcheck.kernellog.records import KernelLogCursor, KernelRecord
from hwcheck.model import ClassifiedXid
from tests.support.external import require_program, require_root
from tests.support.scripted_kernel import ScriptedKernel

KMSG = "/dev/kmsg"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 10.0


# user.info: what a process may write. A test never writes a kernel-facility record
# into the real kernel log: on a rig, fleetd would count it as the card's Xid.
USER_INFO_PRIO = (1 << 3) | 6


def _write_kmsg(text: str) -> None:
    """Print one user-facility record into the kernel log from userspace (root only)."""
    fd = os.open(KMSG, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, f"<{USER_INFO_PRIO}>{text}\n".encode())
    finally:
        os.close(fd)


class RecordingSource:
    """The real KmsgSource, keeping every record it hands the follower."""

    name = "kmsg"

    def __init__(self, source: KmsgSource) -> None:
        self.source = source
        self.seen: list[KernelRecord] = []

    def read_available(self) -> list[KernelRecord]:
        records = self.source.read_available()
        self.seen.extend(records)
        return records

    def wait(self, timeout_s: float) -> bool:
        return self.source.wait(timeout_s)

    @property
    def lost_records(self) -> int:
        return self.source.lost_records

    def close(self) -> None:
        self.source.close()


def _collect_until(source: KmsgSource, seen: list[KernelRecord], done: Callable[[], bool]) -> None:
    """Read into ``seen`` until ``done()``; fail after DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        if time.monotonic() > deadline:
            pytest.fail("the record never arrived through /dev/kmsg")
        source.wait(0.5)
        seen.extend(source.read_available())


def _tagged(records: Iterable[KernelRecord], tag: str) -> list[KernelRecord]:
    return [record for record in records if tag in record.text]


@pytest.mark.root
def test_real_kmsg_delivers_once_and_resumes_after_the_cursor() -> None:
    require_root("writes a user-facility record to /dev/kmsg")
    boot_id = read_boot_id()
    first_tag = f"cmpfleet-test-{uuid.uuid4()}"
    second_tag = f"cmpfleet-test-{uuid.uuid4()}"
    line = "NVRM: Xid (PCI:0000:fe:00): 31, pid=1, name={}, test"

    source = KmsgSource(KMSG, None, boot_id, from_start=False)
    seen: list[KernelRecord] = []
    try:
        seen.extend(source.read_available())
        assert _tagged(seen, first_tag) == []
        _write_kmsg(line.format(first_tag))
        _collect_until(source, seen, lambda: bool(_tagged(seen, first_tag)))
        seen.extend(source.read_available())  # anything still pending: no second copy
        mine = _tagged(seen, first_tag)
        assert len(mine) == 1
        record = mine[0]
        assert record.boot_id == boot_id
        assert record.seq is not None
        assert (record.facility, record.from_user_space) == (1, True)
        assert record.text == line.format(first_tag)
        last_seq = max(r.seq for r in seen if r.seq is not None)
    finally:
        source.close()
        source.close()  # safe twice

    cursor = KernelLogCursor(boot_id=boot_id, last_seq=last_seq)
    resumed = KmsgSource(KMSG, cursor, boot_id, from_start=True)
    again: list[KernelRecord] = []
    try:
        _write_kmsg(line.format(second_tag))
        _collect_until(resumed, again, lambda: bool(_tagged(again, second_tag)))
        again.extend(resumed.read_available())
        assert len(_tagged(again, second_tag)) == 1
        assert _tagged(again, first_tag) == []
        assert all(r.seq is not None and r.seq > last_seq for r in again)
    finally:
        resumed.close()


@pytest.mark.root
def test_live_follower_ignores_an_xid_written_from_user_space() -> None:
    require_root("writes a user-facility record to /dev/kmsg")
    boot_id = read_boot_id()
    tag = f"cmpfleet-test-{uuid.uuid4()}"
    recording = RecordingSource(KmsgSource(KMSG, None, boot_id, from_start=False))
    fed: list[tuple[ClassifiedXid, KernelRecord]] = []
    follower = XidFollower(
        recording, XidCatalogue(), lambda x, r: fed.append((x, r)), threading.Event()
    )
    try:
        follower.drain()
        _write_kmsg(f"NVRM: Xid (PCI:0000:fe:00): 79, pid=1, name={tag}, GPU has fallen off")
        deadline = time.monotonic() + DEADLINE_S
        while not _tagged(recording.seen, tag):
            if time.monotonic() > deadline:
                pytest.fail("the record never arrived through /dev/kmsg")
            recording.wait(0.5)
            follower.drain()
    finally:
        recording.close()
    (record,) = _tagged(recording.seen, tag)
    assert parse_xid(record.text) is not None, "the text alone would pass for an Xid"
    assert [r.text for _, r in fed if tag in r.text] == []
    assert follower.last_cursor is not None and follower.last_cursor.last_seq >= (record.seq or 0)


@pytest.mark.root
def test_real_kmsg_history_is_this_boot_in_order() -> None:
    require_root("reads /dev/kmsg (kernel.dmesg_restrict)")
    boot_id = read_boot_id()
    records = read_kmsg_history(KMSG, boot_id=boot_id)
    assert records, "a booted kernel always has records"
    seqs = [r.seq for r in records if r.seq is not None]
    assert len(seqs) == len(records)
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == len(seqs)
    assert {r.boot_id for r in records} == {boot_id}


@pytest.mark.root
@pytest.mark.external
def test_kmsg_without_cap_syslog_says_what_to_do() -> None:
    require_root("drops CAP_SYSLOG from a root child to be refused /dev/kmsg")
    setpriv = require_program("setpriv", "util-linux")
    restricted = Path("/proc/sys/kernel/dmesg_restrict").read_text().strip() == "1"
    child = (
        "from hwcheck.kernellog.kmsg import KmsgSource\n"
        "from hwcheck.kernellog.errors import KernelLogUnavailable\n"
        "try:\n"
        "    KmsgSource('/dev/kmsg', None, 'b').close()\n"
        "    print('opened')\n"
        "except KernelLogUnavailable as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [
            setpriv,
            "--bounding-set",
            "-syslog",
            "--inh-caps",
            "-syslog",
            sys.executable,
            "-c",
            child,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    if restricted:
        assert done.stdout.strip() == (
            "cannot read /dev/kmsg: run as root or grant CAP_SYSLOG (kernel.dmesg_restrict=1)"
        )
    else:  # kernel.dmesg_restrict=0: anyone may read the kernel log
        assert done.stdout.strip() == "opened"


def test_missing_device_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(KernelLogUnavailable, match="no such file or device") as caught:
        KmsgSource(tmp_path / "kmsg", None, "b")
    assert str(caught.value) == f"cannot read {tmp_path / 'kmsg'}: no such file or device"


# --- the kernel's read, scripted ---------------------------------------------------------


def rec(seq: int, text: str = "r") -> bytes:
    return f"6,{seq},{seq * 1000},-;{text} {seq}\n SUBSYSTEM=pci\n".encode()


def epipe() -> OSError:
    return BrokenPipeError(errno.EPIPE, "Broken pipe")


@pytest.fixture
def device(tmp_path: Path) -> Path:
    """A real file to open in place of the device (the reads are scripted)."""
    path = tmp_path / "kmsg"
    path.write_bytes(b"")
    return path


def test_epipe_gap_is_counted_from_the_next_seq(device: Path) -> None:
    kernel = ScriptedKernel([rec(10), rec(11), epipe(), rec(15), rec(16)])
    source = KmsgSource(device, None, "b", from_start=True, read_record=kernel)
    records = source.read_available()
    assert [r.seq for r in records] == [10, 11, 15, 16]
    assert [r.text for r in records] == ["r 10", "r 11", "r 15", "r 16"]
    assert {r.boot_id for r in records} == {"b"}
    assert (source.lost_records, source.overwrites) == (3, 1)
    kernel.add(epipe(), rec(20))
    assert [r.seq for r in source.read_available()] == [20]
    assert (source.lost_records, source.overwrites) == (6, 2)
    source.close()


def test_resume_skips_through_the_cursor_of_this_boot(device: Path) -> None:
    kernel = ScriptedKernel([rec(seq) for seq in range(5, 14)])
    cursor = KernelLogCursor(boot_id="b", last_seq=11)
    source = KmsgSource(device, cursor, "b", from_start=False, read_record=kernel)
    assert [r.seq for r in source.read_available()] == [12, 13]
    assert source.lost_records == 0
    source.close()


def test_resume_counts_records_overwritten_while_we_were_away(device: Path) -> None:
    kernel = ScriptedKernel([rec(seq) for seq in range(14, 17)])
    source = KmsgSource(device, KernelLogCursor("b", 11), "b", read_record=kernel)
    assert [r.seq for r in source.read_available()] == [14, 15, 16]
    assert source.lost_records == 2
    source.close()


def test_cursor_of_another_boot_reads_all_of_this_boot(device: Path) -> None:
    kernel = ScriptedKernel([rec(0), rec(1), rec(2)])
    source = KmsgSource(device, KernelLogCursor("old-boot", 500), "b", read_record=kernel)
    assert [r.seq for r in source.read_available()] == [0, 1, 2]
    assert source.lost_records == 0
    source.close()


def test_garbage_is_counted_and_read_errors_are_raised(device: Path) -> None:
    kernel = ScriptedKernel([b"not a record\n", rec(3), OSError(errno.EIO, "Input/output error")])
    source = KmsgSource(device, None, "b", from_start=True, read_record=kernel)
    with pytest.raises(KernelLogUnavailable, match=r"Input/output error$"):
        source.read_available()
    assert source.unparsable_records == 1
    source.close()
    with pytest.raises(KernelLogUnavailable, match="closed"):
        source.read_available()


def test_from_start_false_skips_what_is_already_there(tmp_path: Path) -> None:
    # A regular file answers read() until EOF: the seek to the end is what is tested here.
    path = tmp_path / "kmsg"
    path.write_bytes(rec(1))
    from_start = KmsgSource(path, None, "b", from_start=True)
    from_end = KmsgSource(path, None, "b", from_start=False)
    try:
        assert [r.seq for r in from_start.read_available()] == [1]
        assert from_end.read_available() == []
    finally:
        from_start.close()
        from_end.close()
