"""JournalctlSource, journal_history and the kmsg -> journald fallback, with a fake journalctl."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from hwcheck.kernellog.catalogue import XidCatalogue
from hwcheck.kernellog.errors import KernelLogUnavailable
from hwcheck.kernellog.follower import XidFollower
from hwcheck.kernellog.history import host_kernel_log_history, open_host_kernel_log
from hwcheck.kernellog.journal import (
    JournalctlSource,
    journal_history,
    normalize_boot_id,
    parse_journal_entry,
)
from hwcheck.kernellog.records import KernelLogCursor, KernelLogSource, KernelRecord
from hwcheck.model import ClassifiedXid
from tests.support.waiting import wait_until

DATA = Path(__file__).parent / "data"
FAKE = Path(__file__).parent / "fake_journalctl.py"
BOOT = "ce0556cc-2476-4c6f-9c45-c3610df3d8bf"
DEADLINE_S = 10.0


def _from_now(argv: list[str]) -> bool:
    return any(word == "-n" and argv[i + 1 : i + 2] == ["0"] for i, word in enumerate(argv))


@dataclass
class FakeJournal:
    """The fake's state dir: recorded entries in, argv of every run out."""

    state: Path
    entries: Path
    recorded: list[str]

    def argvs(self) -> list[list[str]]:
        text = (self.state / "argv.jsonl").read_text()
        return [json.loads(line) for line in text.splitlines()]

    def append(self, message: str, index: int, facility: int = 0) -> None:
        entry = json.loads(self.recorded[-1])
        entry["MESSAGE"] = message
        entry["SYSLOG_FACILITY"] = str(facility)  # journald keeps a kmsg writer's facility
        entry["__CURSOR"] = f"s=fake;i={index:x}"
        entry["_SOURCE_MONOTONIC_TIMESTAMP"] = str(9_000_000_000 + index)
        with self.entries.open("a") as out:
            out.write(json.dumps(entry) + "\n")

    def followers(self) -> list[list[str]]:
        """The argv of each ``-f`` run that has read the journal and now waits for more."""
        path = self.state / "following.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line)["argv"] for line in lines]

    def following_from_now(self) -> bool:
        """True once a ``-f -n 0`` run (one that starts "now") is following.

        Not "any run without ``--after-cursor``": the whole boot's run (``-b --no-tail``,
        from a kernel cursor) has none either, and it is already following when the
        from-now run starts; under load the test then appended its entry before the
        from-now run had read the journal, which took it for history.
        """
        return any(_from_now(argv) for argv in self.followers())

    def cursor(self, index: int) -> str:
        return str(json.loads(self.recorded[index])["__CURSOR"])


@pytest.fixture
def fake_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeJournal:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "journalctl"
    program.write_text(
        f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(FAKE)!r}, run_name='__main__')\n"
    )
    program.chmod(0o755)
    state = tmp_path / "journal"
    state.mkdir()
    recorded = (DATA / "journal-k.json").read_text().splitlines()
    entries = state / "entries.jsonl"
    entries.write_text("\n".join(recorded) + "\n")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_JOURNAL_DIR", str(state))
    return FakeJournal(state=state, entries=entries, recorded=recorded)


def _read_until(source: KernelLogSource, count: int) -> list[KernelRecord]:
    records: list[KernelRecord] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(records) < count:
        if time.monotonic() > deadline:
            pytest.fail(f"got {len(records)} of {count} records from the journal")
        source.wait(0.5)
        records.extend(source.read_available())
    return records


def test_follow_this_boot_from_the_start(fake_journal: FakeJournal) -> None:
    source = JournalctlSource(boot_id=BOOT, from_start=True)
    try:
        records = _read_until(source, 6)
        assert [r.text for r in records] == [
            "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.127.05  Tue Oct  8 03:22:07 UTC 2024",
            "NVRM: GPU at PCI:0000:01:00: GPU-3a7d1b2c-4e5f-6789-abcd-ef0123456789",
            "r8169 0000:06:00.0 enp6s0: Link is Up - 1Gbps/Full - flow control rx/tx",
            "NVRM: Xid (PCI:0000:01:00): 31, pid=13641, name=python3, Ch 00000008, intr 00000000. "
            "MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_10 faulted @ 0x7fd7_90743000. "
            "Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
            # MESSAGE as an array of bytes (not UTF-8): decoded with replacement.
            "NVRM: Xid (PCI:0000:01:00): 13, pid=13641, name=caf\ufffd-worker, Graphics Exception",
            "ACPI Error: AE_NOT_FOUND status 0x31",
        ]
        assert {r.seq for r in records} == {None}
        assert {r.boot_id for r in records} == {BOOT}
        assert records[3].timestamp_usec == 5140900123
        assert source.journal_cursor == fake_journal.cursor(5)
        assert source.lost_records == 0

        fake_journal.append(
            "NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
            99,
        )
        live = _read_until(source, 1)
        assert [r.text for r in live] == [
            "NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
        ]
        assert source.journal_cursor == "s=fake;i=63"
    finally:
        source.close()
        source.close()
    argv = fake_journal.argvs()[0]
    assert argv == ["-k", "-f", "-o", "json", "--no-pager", "-b", "--no-tail"]


def test_resume_after_a_journal_cursor(fake_journal: FakeJournal) -> None:
    source = JournalctlSource(boot_id=BOOT, after_cursor=fake_journal.cursor(3))
    try:
        records = _read_until(source, 2)
        assert [r.timestamp_usec for r in records] == [5140950000, 5150000007]
    finally:
        source.close()
    assert fake_journal.argvs()[0][-3:] == ["--after-cursor", fake_journal.cursor(3), "--no-tail"]


def test_a_kernel_cursor_rereads_the_boot_and_no_cursor_starts_now(
    fake_journal: FakeJournal,
) -> None:
    with_cursor = JournalctlSource(boot_id=BOOT, cursor=KernelLogCursor(BOOT, 1840))
    try:
        assert len(_read_until(with_cursor, 6)) == 6
    finally:
        with_cursor.close()
    # The whole boot's run (it may not have written that it follows yet: it printed its
    # records first) is not the from-now run the wait below needs.
    assert not fake_journal.following_from_now()
    from_now = JournalctlSource(boot_id=BOOT)
    try:
        assert from_now.wait(0.2) is False
        assert from_now.read_available() == []
        # "From now" is when the second journalctl read the journal: wait for it, as an
        # entry written before that is history to it (a loaded machine starts it late).
        wait_until(fake_journal.following_from_now, DEADLINE_S, "the follower from now")
        fake_journal.append("later", 7)
        assert [r.text for r in _read_until(from_now, 1)] == ["later"]
    finally:
        from_now.close()
    assert fake_journal.argvs()[1][-3:] == ["-b", "-n", "0"]


def test_a_failing_journalctl_is_reported_with_its_reason(fake_journal: FakeJournal) -> None:
    (fake_journal.state / "fail").touch()
    source = JournalctlSource(boot_id=BOOT, from_start=True)
    try:
        with pytest.raises(KernelLogUnavailable) as caught:
            _read_until(source, 1)
        assert str(caught.value).endswith("exited with status 1: No journal files were found.")
    finally:
        source.close()


def test_missing_journalctl(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(KernelLogUnavailable, match="`journalctl` not found on PATH"):
        JournalctlSource(boot_id=BOOT)
    with pytest.raises(KernelLogUnavailable, match="`journalctl` not found on PATH"):
        journal_history(BOOT)


def test_malformed_output_is_counted_and_logged(
    fake_journal: FakeJournal, caplog: pytest.LogCaptureFixture
) -> None:
    with fake_journal.entries.open("a") as out:
        out.write('{"MESSAGE": 42}\nnot json at all\n')
    fake_journal.append("after the junk", 8)
    source = JournalctlSource(boot_id=BOOT, from_start=True)
    caplog.set_level(logging.WARNING, logger="hwcheck.kernellog.journal")
    try:
        records = _read_until(source, 7)
        assert records[-1].text == "after the junk"
        assert source.malformed_lines == 2
        assert len([r for r in caplog.records if "not an entry" in r.getMessage()]) == 2
    finally:
        source.close()


def test_journal_history(fake_journal: FakeJournal) -> None:
    records = journal_history(BOOT)
    assert len(records) == 6
    assert records[1].text.startswith("NVRM: GPU at PCI:0000:01:00")
    assert fake_journal.argvs()[0] == ["-k", "-b", "-o", "json", "--no-pager"]
    (fake_journal.state / "fail").touch()
    with pytest.raises(KernelLogUnavailable, match=r"status 1: No journal files were found\.$"):
        journal_history(BOOT)


def test_entry_parsing() -> None:
    record, cursor = parse_journal_entry(
        '{"MESSAGE":"x","__CURSOR":"c","__MONOTONIC_TIMESTAMP":"12"}', "given-boot"
    )
    assert (record.text, record.boot_id, record.timestamp_usec, cursor) == (
        "x",
        "given-boot",
        12,
        "c",
    )
    assert record.facility is None  # neither SYSLOG_FACILITY nor _TRANSPORT: unknown
    facilities = {
        '{"MESSAGE":"x","SYSLOG_FACILITY":"0","_TRANSPORT":"kernel"}': (0, False),
        '{"MESSAGE":"x","SYSLOG_FACILITY":"1","_TRANSPORT":"kernel"}': (1, True),
        '{"MESSAGE":"x","_TRANSPORT":"kernel"}': (0, False),
        '{"MESSAGE":"x","_TRANSPORT":"syslog"}': (1, True),
    }
    for line, expected in facilities.items():
        parsed, _ = parse_journal_entry(line, None)
        assert (parsed.facility, parsed.from_user_space) == expected, line
    assert normalize_boot_id("CE0556CC24764C6F9C45C3610DF3D8BF") == BOOT
    assert normalize_boot_id("not-a-uuid") == "not-a-uuid"
    for bad in ("[1, 2]", '{"MESSAGE": [300]}', "{"):
        with pytest.raises(ValueError, match=r"."):
            parse_journal_entry(bad, None)


# --- the fallback ------------------------------------------------------------------------


def test_auto_falls_back_to_journald_when_kmsg_cannot_be_read(
    fake_journal: FakeJournal, tmp_path: Path
) -> None:
    missing = tmp_path / "no-kmsg"
    source = open_host_kernel_log(None, BOOT, kmsg_path=missing, from_start=True)
    try:
        assert source.name == "journal"
        assert len(_read_until(source, 6)) == 6
    finally:
        source.close()
    assert len(host_kernel_log_history(BOOT, kmsg_path=missing)) == 6
    with pytest.raises(KernelLogUnavailable, match="no such file or device"):
        open_host_kernel_log(None, BOOT, kmsg_path=missing, prefer="kmsg")


def test_prefer_journal_and_kmsg_by_name(fake_journal: FakeJournal, tmp_path: Path) -> None:
    kmsg = tmp_path / "kmsg"
    kmsg.write_bytes(b"")
    source = open_host_kernel_log(None, BOOT, kmsg_path=kmsg)
    assert source.name == "kmsg"
    source.close()
    source = open_host_kernel_log(None, BOOT, kmsg_path=kmsg, prefer="journal")
    assert source.name == "journal"
    source.close()
    with pytest.raises(ValueError, match="must be one of auto, kmsg, journal, got 'dmesg'"):
        open_host_kernel_log(None, BOOT, prefer="dmesg")  # type: ignore[arg-type]


def test_both_sources_failing_name_both_reasons(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    missing = tmp_path / "no-kmsg"
    expected = (
        f"cannot read {missing}: no such file or device; and the fallback failed: "
        "cannot read the kernel log through journald: `journalctl` not found on PATH "
        "(install systemd, or run as root to read /dev/kmsg)"
    )
    with pytest.raises(KernelLogUnavailable) as caught:
        open_host_kernel_log(None, BOOT, kmsg_path=missing)
    assert str(caught.value) == expected
    with pytest.raises(KernelLogUnavailable) as caught:
        host_kernel_log_history(BOOT, kmsg_path=missing)
    assert str(caught.value) == expected


def test_follower_on_the_journal(fake_journal: FakeJournal) -> None:
    source = JournalctlSource(boot_id=BOOT, from_start=True)
    seen: list[ClassifiedXid] = []
    arrived = threading.Event()

    def on_event(found: ClassifiedXid, record: KernelRecord) -> None:
        seen.append(found)
        if found.event.xid == 79:
            arrived.set()

    stop = threading.Event()
    follower = XidFollower(source, XidCatalogue(), on_event, stop, wait_s=0.1)
    thread = threading.Thread(target=follower.run, daemon=True)
    thread.start()
    try:
        # A process wrote this one into /dev/kmsg (user facility): journald says so.
        fake_journal.append("NVRM: Xid (PCI:0000:01:00): 43, pid=1, name=prank, planted", 49, 1)
        fake_journal.append("NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.", 50)
        assert arrived.wait(DEADLINE_S)
    finally:
        stop.set()
        thread.join(DEADLINE_S)
        source.close()
    assert not thread.is_alive()
    assert [(c.event.xid, c.info.action.value, c.event.seq, c.event.boot_id) for c in seen] == [
        (31, "reboot", None, BOOT),
        (13, "restart_engine", None, BOOT),
        (79, "reboot", None, BOOT),
    ]
    assert follower.last_cursor is None  # journald has no kernel seq
    assert follower.gpu_uuids == {"0000:01:00.0": "GPU-3a7d1b2c-4e5f-6789-abcd-ef0123456789"}
