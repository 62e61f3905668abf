"""The pure Xid parser on recorded logs of every format, plus properties over random text."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwcheck.kernellog.kmsg_format import format_kmsg_record, format_xid_text
from hwcheck.kernellog.parser import XID_PREFIX, parse_gpu_uuid_line, parse_xid, scan_lines
from hwcheck.model import XidEvent

DATA = Path(__file__).parent / "data"

MMU_31 = (
    "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_10 faulted @ "
    "0x7fd7_90743000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ"
)


def _lines(name: str) -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").splitlines()


def _summary(event: XidEvent) -> tuple[object, ...]:
    return (
        event.line,
        event.xid,
        event.pci_bus_id,
        event.pid,
        event.process,
        event.message,
        event.seq,
    )


def test_dmesg_capture() -> None:
    lines = _lines("dmesg.log")
    events = list(scan_lines(lines))
    assert [_summary(e) for e in events] == [
        (14, 31, "0000:01:00.0", 13641, "python3", MMU_31, None),
        (15, 43, "0000:01:00.0", 13641, "python3", "Ch 00000008", None),
        (18, 79, "0000:02:00.0", None, None, "GPU has fallen off the bus.", None),
        (
            22,
            154,
            "0000:01:00.0",
            None,
            None,
            "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
            None,
        ),
        # docs/domain.md "Kernel log line formats": pid without name.
        (23, 31, "0000:db:00.0", 13641, None, MMU_31, None),
    ]
    # text is the whole input line, dmesg timestamp included.
    assert events[0].text == lines[13]
    assert events[0].text.startswith("[ 5140.900123] NVRM: Xid (PCI:0000:01:00): 31,")


def test_dmesg_t_capture_with_mig_and_gsp() -> None:
    lines = _lines("dmesg-T.log")
    events = list(scan_lines(lines))
    assert [_summary(e) for e in events] == [
        (
            6,
            31,
            "0000:41:00.0",
            20877,
            "VLLM::Worker_PP",
            "Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_3 faulted "
            "@ 0x7f3b_c0000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE",
            None,
        ),
        (
            7,
            13,
            "0000:41:00.0",
            20877,
            "VLLM::Worker_PP",
            "Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): Out Of Range Address",
            None,
        ),
        (
            10,
            154,
            "0000:42:00.0",
            None,
            None,
            "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
            None,
        ),
        (
            11,
            119,
            "0000:42:00.0",
            1911,
            "nvidia-smi",
            "Timeout after 45s of waiting for RPC response from GPU1 GSP! Expected function 76 "
            "(GSP_RM_CONTROL) (0x20800a4c 0x4).",
            None,
        ),
    ]
    assert events[1].text == lines[6]


def test_journalctl_capture_with_old_driver_lines() -> None:
    events = list(scan_lines(_lines("journalctl-k.log")))
    assert [_summary(e) for e in events] == [
        (5, 79, "0000:0a:00.0", None, None, "GPU has fallen off the bus.", None),
        (6, 13, "0000:0b:00.0", None, None, "Graphics Exception: ESR 0x404600=0x80000001", None),
        (
            8,
            62,
            "0000:0b:00.0",
            3302,
            "python",
            "000000e0 0000e31c 00000000 00000000 00000000",
            None,
        ),
    ]
    assert (
        events[0].text
        == "Sep 29 13:45:55 rig01 kernel: NVRM: Xid (0000:0a:00): 79, GPU has fallen off the bus."
    )


def test_kmsg_capture_sets_seq_and_skips_continuation_lines() -> None:
    lines = _lines("kmsg.log")
    events = list(scan_lines(lines))
    assert [_summary(e) for e in events] == [
        (7, 31, "0000:01:00.0", 13641, "python3", MMU_31, 1840),
        (8, 45, "0000:01:00.0", 13641, "python3", "Ch 00000008", 1841),
        # Written from userspace: facility "user" (prio 12); the parser does not care.
        (9, 31, "0000:fe:00.0", 1, "cmpfleet-test-abc", "test", 1842),
        (
            12,
            154,
            "0000:01:00.0",
            None,
            None,
            "GPU recovery action changed from 0x0 (None) to 0x7 (System Reboot Required)",
            1900,
        ),
    ]
    # Line 10 is a continuation line carrying an Xid-looking text: never an Xid.
    assert lines[9].startswith(" NVRM: Xid (")
    assert parse_xid(lines[9]) is None


@pytest.mark.parametrize(
    "line",
    [
        "[ 5150.000007] ACPI Error: AE_NOT_FOUND status 0x31",
        "xhci_hcd 0000:0c:00.3: Xid 31 is not a thing here, and neither is 0x31",
        "NVRM: Xid is enabled for Ampere GPUs",
        "NVRM: GPU 0000:02:00.0: GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:01:00): , pid=1, name=x, no number",
        "NVRM: Xid (PCI:0000:01:00) 31, missing colon",
        "NVRM: Xid (PCI:0000:01:00): 1e400, pid=1, name=x, not Xid 1",
        "NVRM: Xid (PCI:0000:01:00): 31.5, pid=1, name=x, not Xid 31",
        "NVRM: Xid (PCI:0000:01:00): 0x1f, pid=1, name=x, hex",
        "NVRM: Xid (PCI:0000:01:00): \u0663\u0661, pid=1, Arabic-Indic digits",
        " SUBSYSTEM=pci",
        " DEVICE=+pci:0000:01:00.0",
        "",
    ],
)
def test_lines_that_are_not_xids(line: str) -> None:
    assert parse_xid(line) is None


def test_trailing_newline_is_stripped_from_text() -> None:
    event = parse_xid("NVRM: Xid (PCI:0000:01:00): 31, pid=1, name=a, b\r\n")
    assert event is not None
    assert event.text == "NVRM: Xid (PCI:0000:01:00): 31, pid=1, name=a, b"
    assert event.message == "b"


def test_unknown_pid_without_quotes_and_upper_case_address() -> None:
    event = parse_xid("NVRM: Xid (PCI:0000:0A:00): 109, pid=<unknown>, name=<unknown>, Ctx switch")
    assert event is not None
    assert (event.xid, event.pci_bus_id, event.pid, event.process, event.message) == (
        109,
        "0000:0a:00.0",
        None,
        None,
        "Ctx switch",
    )


def test_huge_numbers_do_not_raise() -> None:
    line = "NVRM: Xid (PCI:0000:01:00): " + "9" * 6000 + ", pid=" + "1" * 6000 + ", x"
    assert parse_xid(line) is None
    event = parse_xid("NVRM: Xid (PCI:0000:01:00): 31, pid=" + "1" * 6000 + ", name=a, m")
    assert event is not None
    assert (event.xid, event.pid, event.process, event.message) == (31, None, "a", "m")


def test_a_pid_in_another_script_or_with_a_sign_is_no_pid() -> None:
    for raw in ("\u0663\u0661", "+5", "1_000", "\u00b2"):
        event = parse_xid(f"NVRM: Xid (PCI:0000:01:00): 31, pid={raw}, name=a, m")
        assert event is not None and event.pid is None, raw
    kmsg = parse_xid("\u0666,1,2,-;NVRM: Xid (PCI:0000:01:00): 31, pid=1, name=a, m")
    assert kmsg is not None and kmsg.seq is None


def test_gpu_uuid_lines() -> None:
    found = [parse_gpu_uuid_line(line) for line in _lines("dmesg.log")]
    assert [item for item in found if item is not None] == [
        ("0000:01:00.0", "GPU-3a7d1b2c-4e5f-6789-abcd-ef0123456789"),
        ("0000:02:00.0", "GPU-5b8e2c3d-6f70-4891-bcde-f01234567890"),
    ]
    assert parse_gpu_uuid_line("NVRM: GPU at PCI:0000:01:00: no uuid here") is None
    assert parse_gpu_uuid_line("NVRM: GPU Board Serial Number: 1652421012345") is None


def test_scan_lines_numbers_from_one() -> None:
    lines = ["a", "NVRM: Xid (PCI:0000:01:00): 13, pid=1, name=a, m", "b"]
    assert [e.line for e in scan_lines(lines)] == [2]


# --- properties --------------------------------------------------------------------------


@given(st.text())
def test_never_raises_on_arbitrary_text(line: str) -> None:
    parse_xid(line)
    parse_gpu_uuid_line(line)


@given(st.text(), st.text())
def test_never_raises_around_the_prefix(before: str, after: str) -> None:
    event = parse_xid(before + XID_PREFIX + after)
    if event is not None:
        assert event.xid >= 0


@given(st.text().filter(lambda text: XID_PREFIX not in text))
def test_no_xid_without_the_full_prefix(line: str) -> None:
    assert parse_xid(line) is None


_addresses = st.builds(
    lambda domain, bus, dev: f"{domain:04x}:{bus:02x}:{dev:02x}.0",
    st.integers(0, 0xFFFF),
    st.integers(0, 0xFF),
    st.integers(0, 0x1F),
)
_names = st.text(
    alphabet=st.characters(codec="ascii", categories=("L", "N", "P", "S"), exclude_characters=","),
    min_size=1,
    max_size=15,
).filter(lambda name: name != "<unknown>")
_messages = st.text(
    alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs")),
    max_size=80,
).filter(
    lambda message: message == message.strip() and not message.startswith(("pid=", "name=", ","))
)


@given(
    _addresses,
    st.integers(0, 10**9),
    st.none() | st.integers(0, 2**31 - 1),
    st.none() | _names,
    _messages,
)
def test_round_trip_of_format_xid_text(
    address: str, xid: int, pid: int | None, process: str | None, message: str
) -> None:
    text = format_xid_text(address, xid, message, pid, process)
    event = parse_xid(text)
    assert event is not None
    assert (event.pci_bus_id, event.xid, event.pid, event.process, event.message) == (
        address,
        xid,
        pid,
        process,
        message,
    )
    assert event.text == text
    # The same line as a kmsg record, a dmesg line and a journalctl line.
    record = format_kmsg_record(text, seq=77, usec=5_000_000)
    as_kmsg = parse_xid(record)
    assert as_kmsg is not None
    assert (as_kmsg.xid, as_kmsg.seq, as_kmsg.pci_bus_id, as_kmsg.pid) == (xid, 77, address, pid)
    for wrapped in (f"[  123.456789] {text}", f"Sep 29 13:45:55 rig01 kernel: {text}"):
        other = parse_xid(wrapped)
        assert other is not None
        assert (other.xid, other.pci_bus_id, other.process, other.message, other.seq) == (
            xid,
            address,
            process,
            message,
            None,
        )
