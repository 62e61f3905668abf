"""The ``/dev/kmsg`` record format, both ways, and the kernel's NVRM Xid line.

``prio,seq,usec,flags[,...];text`` followed by optional continuation lines that start
with a space (``KEY=value`` dictionary entries). The simulated kernel log is written in
this exact format so that it is read back by the same parser and follower as a real rig.
"""

from __future__ import annotations

from hwcheck.kernellog.records import KernelRecord

# Kernel facility 0 (kern), level 4 (warning): NVRM prints Xids at this level.
KERN_WARNING_PRIO = 4


def format_kmsg_record(text: str, seq: int, usec: int, prio: int = KERN_WARNING_PRIO) -> str:
    r"""One record as ``/dev/kmsg`` prints it, newline-terminated.

    Non-printable bytes are escaped as ``\\xNN`` like the kernel does, so a record is one line.
    """
    safe = "".join(ch if ch.isprintable() or ch == "\t" else f"\\x{ord(ch):02x}" for ch in text)
    return f"{prio},{seq},{usec},-;{safe}\n"


def parse_kmsg_record(raw: str, boot_id: str | None = None) -> KernelRecord | None:
    """Parse one ``/dev/kmsg`` record; ``None`` when ``raw`` is not one.

    Continuation lines (starting with a space) are ignored: they carry ``KEY=value``
    dictionary entries, never the message.
    """
    head, sep, rest = raw.partition(";")
    if not sep:
        return None
    fields = head.split(",")
    if len(fields) < 3:
        return None
    try:
        prio = int(fields[0])
        seq = int(fields[1])
        usec = int(fields[2])
    except ValueError:
        return None
    if prio < 0 or seq < 0 or usec < 0:
        return None
    text = rest.split("\n", 1)[0].rstrip("\r")
    return KernelRecord(
        text=text, seq=seq, boot_id=boot_id, timestamp_usec=usec, raw=raw, facility=prio >> 3
    )


def format_xid_text(
    pci_bus_id: str,
    xid: int,
    message: str,
    pid: int | None = None,
    process: str | None = None,
) -> str:
    """The NVRM text of an Xid as the open kernel modules print it.

    ``NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, %s`` (the address has no
    function part); an unknown process prints ``pid='<unknown>', name=<unknown>``.
    """
    address = pci_bus_id.lower()
    if address.count(".") == 1:
        address = address.rsplit(".", 1)[0]
    pid_text = str(pid) if pid is not None else "'<unknown>'"
    name_text = process if process else "<unknown>"
    return f"NVRM: Xid (PCI:{address}): {xid}, pid={pid_text}, name={name_text}, {message}"
