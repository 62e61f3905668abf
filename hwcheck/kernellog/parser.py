"""The pure Xid parser: one kernel-log line in, an ``XidEvent`` (or ``None``) out.

The same NVRM line reaches cmpfleet through ``dmesg``, ``dmesg -T``, ``journalctl -k``,
``/dev/kmsg`` records and saved text, so the parser looks for the NVRM prefix anywhere
in the line instead of parsing each wrapper. It never raises: a malformed line is simply
not an Xid. A cheap substring test runs before any regular expression because almost
every kernel line is not an Xid and ``fleetctl xid scan`` must keep up with ``grep``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from hwcheck.model import XidEvent, normalize_pci_bus_id

# The full prefix: "Xid 31" or "0x31" elsewhere in a line is not an Xid.
XID_PREFIX = "NVRM: Xid ("
GPU_UUID_PREFIX = "NVRM: GPU at "

# Digit runs are bounded so that int() never meets a 5,000-digit number (ValueError), and
# ASCII (``[0-9]``, not ``\d``, which takes any script's digits). The Xid number ends the
# field (a comma, a space or the line's end): ``1e400`` or ``31.5`` is not an Xid at all.
_XID_RE = re.compile(
    r"NVRM: Xid \((?P<inside>[^)]*)\):\s*(?P<xid>[0-9]{1,10})(?=[,\s]|$)(?P<rest>.*)"
)
_DECIMAL_RE = re.compile(r"[0-9]{1,10}")
# Optional "PCI:" then domain:bus:device(.function); MIG " GPU-I:01 GPU-CI:02" may follow.
_ADDRESS_RE = re.compile(
    r"(?:PCI:)?(?P<address>[0-9a-fA-F]{1,8}:[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2}(?:\.[0-7])?)(?![0-9a-fA-F])"
)
_KMSG_HEAD_RE = re.compile(
    r"(?P<prio>[0-9]{1,10}),(?P<seq>[0-9]{1,20}),(?P<usec>[0-9]{1,20})(?:,[^;]*)?;"
)
_PID_RE = re.compile(r"pid=(?P<pid>'<unknown>'|<unknown>|[^,\s]*),?\s*")
_NAME_RE = re.compile(r"name=(?P<name>[^,]*),?\s*")
_GPU_UUID_RE = re.compile(
    r"NVRM: GPU at (?:PCI:)?(?P<address>[0-9a-fA-F]{1,8}:[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2}(?:\.[0-7])?):\s*(?P<uuid>GPU-[0-9a-fA-F-]{8,64})"
)
_UNKNOWN_PROCESS = "<unknown>"


def _strip_newline(line: str) -> str:
    r"""The line without its trailing newline (``\n`` or ``\r\n``)."""
    return line.rstrip("\r\n")


def _kmsg_seq(text: str) -> int | None:
    """The sequence number when ``text`` is a ``/dev/kmsg`` record, else ``None``."""
    head = _KMSG_HEAD_RE.match(text)
    if head is None:
        return None
    return int(head.group("seq"))


def _split_pid_name(rest: str) -> tuple[int | None, str | None, str]:
    """Split ``pid=..., name=..., message`` into its parts (each part optional)."""
    pid: int | None = None
    process: str | None = None
    pid_match = _PID_RE.match(rest)
    if pid_match is not None:
        raw_pid = pid_match.group("pid")
        if _DECIMAL_RE.fullmatch(raw_pid):
            pid = int(raw_pid)
        rest = rest[pid_match.end() :]
    name_match = _NAME_RE.match(rest)
    if name_match is not None:
        raw_name = name_match.group("name").strip()
        if raw_name and raw_name != _UNKNOWN_PROCESS:
            process = raw_name
        rest = rest[name_match.end() :]
    return pid, process, rest.strip()


def parse_xid(line: str, line_number: int | None = None) -> XidEvent | None:
    """Find an Xid in one kernel-log line of any supported format; ``None`` if there is none.

    A line that starts with a space is a ``/dev/kmsg`` continuation line (``KEY=value``
    dictionary entries) and is never an Xid. ``text`` is the whole input line, ``seq`` is
    filled when the line is a ``/dev/kmsg`` record, ``line`` is ``line_number``.
    """
    if XID_PREFIX not in line or line.startswith(" "):
        return None
    text = _strip_newline(line)
    match = _XID_RE.search(text)
    if match is None:
        return None
    pci_bus_id: str | None = None
    address = _ADDRESS_RE.search(match.group("inside"))
    if address is not None:
        try:
            pci_bus_id = normalize_pci_bus_id(address.group("address"))
        except ValueError:
            pci_bus_id = None
    rest = match.group("rest").lstrip()
    if rest.startswith(","):
        rest = rest[1:].lstrip()
    pid, process, message = _split_pid_name(rest)
    return XidEvent(
        xid=int(match.group("xid")),
        text=text,
        message=message,
        pci_bus_id=pci_bus_id,
        pid=pid,
        process=process,
        seq=_kmsg_seq(text),
        line=line_number,
    )


def scan_lines(lines: Iterable[str]) -> Iterator[XidEvent]:
    """Every Xid in ``lines``, with ``line`` set to its 1-based line number."""
    for number, line in enumerate(lines, start=1):
        if XID_PREFIX in line:
            event = parse_xid(line, number)  # built with its number: no copy per event
            if event is not None:
                yield event


def parse_gpu_uuid_line(line: str) -> tuple[str, str] | None:
    """``(pci_bus_id, uuid)`` from ``NVRM: GPU at PCI:0000:01:00: GPU-<uuid>``; else ``None``."""
    if GPU_UUID_PREFIX not in line:
        return None
    match = _GPU_UUID_RE.search(line)
    if match is None:
        return None
    try:
        address = normalize_pci_bus_id(match.group("address"))
    except ValueError:
        return None
    return address, match.group("uuid")
