"""One reading of "the kernel wrote this": ``xid scan`` and the daemon agree on every format.

A process that quotes an Xid (a monitoring script re-logging what it saw, ``echo > /dev/kmsg``)
is never an Xid: not on the daemon's sources, not in a scan, whatever the format.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from daemon.cli.rig.xid import ScanTally, scan_events
from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.filelog import FileSource
from hwcheck.kernellog.follower import XidFollower
from hwcheck.kernellog.journal import parse_journal_entry
from hwcheck.kernellog.kmsg_format import parse_kmsg_record
from hwcheck.kernellog.origin import read_log_line
from hwcheck.kernellog.records import KernelRecord
from tests.support.cli import run_fleetctl_here as fleetctl

BOOT = "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
XID = "NVRM: Xid (PCI:0000:{bus}:00): {xid}, pid=4242, name=python3, {what}"


def _xid(bus: str, xid: int, what: str = "fault") -> str:
    return XID.format(bus=bus, xid=xid, what=what)


def _journal(message: str, **fields: str) -> str:
    return json.dumps({"MESSAGE": message, "_BOOT_ID": BOOT.replace("-", ""), **fields})


# (line, written from user space?) for every format a saved or followed log comes in.
ORIGINS = [
    # /dev/kmsg records: facility = prio >> 3
    (f"4,10,100,-;{_xid('01', 79)}", False),
    (f"3,11,100,-,caller=T1;{_xid('01', 79)}", False),
    (f"12,12,100,-;{_xid('01', 79)}", True),  # echo > /dev/kmsg: user.warning
    (f"11,13,100,-;{_xid('01', 31)}", True),  # user.err
    (f"134,14,100,-;{_xid('01', 31)}", True),  # local0.info
    # journalctl -o json
    (_journal(_xid("02", 13), SYSLOG_FACILITY="0", _TRANSPORT="kernel"), False),
    (_journal(_xid("02", 13), _TRANSPORT="kernel"), False),
    (_journal(_xid("02", 13), SYSLOG_FACILITY="1", _TRANSPORT="kernel"), True),
    (_journal(_xid("02", 13), _TRANSPORT="syslog", SYSLOG_IDENTIFIER="python3"), True),
    (_journal(_xid("02", 13), _TRANSPORT="stdout"), True),
    # dmesg -x (facility names), with and without -T
    (f"kern  :warn  : [    4.100000] {_xid('03', 31)}", False),
    (f"kern  :err   : [Sun Dec  6 04:40:02 2026] {_xid('03', 31)}", False),
    (f"user  :warn  : [    4.200000] {_xid('03', 31)}", True),
    (f"daemon:info  : [    4.300000] {_xid('03', 31)}", True),
    # syslog files and journalctl text outputs: the identifier decides
    (f"Dec  6 04:40:02 rig1 kernel: [ 1234.567890] {_xid('04', 48)}", False),
    (f"Dec 06 04:40:02 rig1 kernel: {_xid('04', 48)}", False),  # -o short
    (f"Dec 06 04:40:02.123456 rig1 kernel: {_xid('04', 48)}", False),  # short-precise
    (f"2026-12-06T04:40:02+0000 rig1 kernel: {_xid('04', 48)}", False),  # short-iso
    (f"2026-12-06T04:40:02.123456+00:00 rig1 kernel: {_xid('04', 48)}", False),  # rsyslog
    (f"Sun 2026-12-06 04:40:02 UTC rig1 kernel: {_xid('04', 48)}", False),  # short-full
    (f"[ 1234.567890] rig1 kernel: {_xid('04', 48)}", False),  # short-monotonic
    (f"1733460002.123456 rig1 kernel: {_xid('04', 48)}", False),  # short-unix
    (f"Dec  6 04:40:03 rig1 python3[4242]: saw {_xid('04', 79)}", True),
    (f"Dec 06 04:40:03 rig1 python3[4242]: {_xid('04', 79)}", True),
    (f"2026-12-06T04:40:03+0000 rig1 gpu-watch[77]: {_xid('04', 79)}", True),
    (f"Dec 06 04:40:03 rig1 root: {_xid('04', 79)}", True),  # logger without a tag
    (f"Dec 06 04:40:03 rig1 kernel[99]: {_xid('04', 79)}", True),  # a process named kernel
    (f"<4>Dec  6 04:40:02 rig1 kernel: {_xid('04', 48)}", False),  # syslog on the wire
    (f"<12>Dec  6 04:40:02 rig1 kernel: {_xid('04', 48)}", True),
    # plain dmesg, dmesg -T, bare text: the format does not say; the kernel's ring buffer
    (f"[   10.000001] {_xid('05', 31)}", False),
    (f"[Sun Dec  6 04:40:02 2026] {_xid('05', 31)}", False),
    (_xid("05", 31), False),
]


@pytest.mark.parametrize(("line", "from_user_space"), ORIGINS)
def test_each_format_says_who_wrote_the_line(line: str, from_user_space: bool) -> None:
    record = read_log_line(line, BOOT)
    assert record.from_user_space is from_user_space
    assert "NVRM: Xid (" in record.text


def test_malformed_lines_are_plain_lines() -> None:
    for line in ["{not json", '{"MESSAGE": 5}', "[" * 5000, "99999999999,1,1,-;x", "{" * 3000]:
        record = read_log_line(line)
        assert (record.text, record.facility) == (line, None)


def _daemon_xids(records: list[KernelRecord]) -> list[tuple[int, str | None]]:
    follower = XidFollower(_NoSource(), XidCatalogue(), lambda *_: None, threading.Event())
    found = [follower.classify_record(record) for record in records]
    return [(f.event.xid, f.event.pci_bus_id) for f in found if f is not None]


class _NoSource:
    """The follower is driven through ``classify_record`` here: no source is read."""

    name = "none"
    lost_records = 0

    def read_available(self) -> list[KernelRecord]:
        return []

    def wait(self, timeout_s: float) -> bool:
        return False

    def close(self) -> None:
        return None


def _scan_xids(lines: list[str]) -> tuple[list[tuple[int, str | None]], int]:
    tally = ScanTally()
    found = [(e.xid, e.pci_bus_id) for e in scan_events(lines, tally)]
    return found, tally.user_space


def _kernel_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if not read_log_line(line).from_user_space]


def test_scan_and_daemon_agree_on_a_kmsg_dump(tmp_path: Path) -> None:
    """The same records through the daemon's file source and kmsg parser, and through a scan."""
    lines = [line for line, _ in ORIGINS if line[0].isdigit() and ";" in line]
    path = tmp_path / "kmsg.dump"
    path.write_text("\n".join(lines) + "\n")
    source = FileSource(path, None, BOOT)
    try:
        follower = XidFollower(source, XidCatalogue(), lambda *_: None, threading.Event())
        via_file = [(c.event.xid, c.event.pci_bus_id) for c in follower.drain()]
    finally:
        source.close()
    via_kmsg = _daemon_xids([r for r in (parse_kmsg_record(x, BOOT) for x in lines) if r])
    scanned, ignored = _scan_xids(lines)
    assert scanned == via_file == via_kmsg == [(79, "0000:01:00.0"), (79, "0000:01:00.0")]
    assert ignored == 3


def test_scan_and_daemon_agree_on_a_journal() -> None:
    """``journalctl -k -o json`` lines: the daemon's journal parser and a scan of the same."""
    lines = [line for line, _ in ORIGINS if line.startswith("{")]
    records = [parse_journal_entry(line, BOOT)[0] for line in lines]
    scanned, ignored = _scan_xids(lines)
    assert scanned == _daemon_xids(records) == [(13, "0000:02:00.0")] * 2
    assert ignored == 3


def test_scan_and_daemon_agree_on_syslog_and_dmesg_text(tmp_path: Path) -> None:
    """A syslog file (and ``dmesg -x`` output) followed by the daemon and scanned."""
    lines = [line for line, _ in ORIGINS if not line.startswith("{") and not line[0].isdigit()]
    lines += [line for line, _ in ORIGINS if line[0].isdigit() and ";" not in line]
    path = tmp_path / "syslog"
    path.write_text("\n".join(lines) + "\n")
    source = FileSource(path, None, BOOT)
    try:
        follower = XidFollower(source, XidCatalogue(), lambda *_: None, threading.Event())
        via_daemon = [(c.event.xid, c.event.pci_bus_id) for c in follower.drain()]
    finally:
        source.close()
    scanned, ignored = _scan_xids(lines)
    assert scanned == via_daemon
    assert len(scanned) == len(_kernel_lines(lines))
    assert 79 not in {xid for xid, _ in scanned}  # every 79 was an echo
    assert ignored == len(lines) - len(scanned) == 8


def test_xid_scan_counts_user_space_echoes_apart(tmp_path: Path) -> None:
    lines = [line for line, _ in ORIGINS]
    path = tmp_path / "mixed.log"
    path.write_text("\n".join(lines) + "\n")
    expected = _kernel_lines(lines)
    echoes = len(lines) - len(expected)

    result = fleetctl("xid", "scan", str(path), "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)  # the documented list, unchanged
    assert isinstance(found, list)
    assert [row["text"] for row in found] == expected
    assert [row["line"] for row in found] == [lines.index(t) + 1 for t in expected]
    assert result.stderr.strip() == f"{echoes} lines quoted an Xid from user space: ignored"

    human = fleetctl("xid", "scan", str(path))
    assert human.returncode == 0, human.stderr
    assert f"{echoes} lines quoted an Xid from user space: ignored" in human.stdout
    assert human.stdout.startswith(f"{len(expected)} Xid event(s)")


def test_xid_scan_of_only_echoes_reports_no_xid() -> None:
    log = f"Dec 06 04:40:03 rig1 python3[4242]: {_xid('04', 79)}\n12,1,5,-;{_xid('01', 31)}\n"
    result = fleetctl("xid", "scan", "-", "--json", stdin=log)
    assert json.loads(result.stdout) == []
    assert "2 lines quoted an Xid from user space: ignored" in result.stderr
    human = fleetctl("xid", "scan", "-", stdin=log)
    assert human.stdout.splitlines() == [
        "no Xid events in stdin",
        "2 lines quoted an Xid from user space: ignored",
    ]
