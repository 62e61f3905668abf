"""Who wrote a kernel-log line: the one reading of "is this a kernel record" for every format.

An ``NVRM: Xid`` line is only an Xid when the kernel printed it. A process can quote one:
root can write into ``/dev/kmsg`` (the record keeps the writer's facility, ``user`` unless it
says otherwise), and a monitoring script that re-logs what it saw lands in syslog and the
journal under its own identifier (``python3[4242]:``). The daemon's sources (``/dev/kmsg``,
``journalctl -k -o json``, a followed file) and ``fleetctl xid scan`` all read a line's
origin here, so they agree on which records are Xids (docs/domain.md "Kernel log plumbing").

What each format says about the writer:

- ``/dev/kmsg`` records ``prio,seq,usec,flags;text``: facility = ``prio >> 3`` (0 = kernel).
- ``journalctl -o json``: ``SYSLOG_FACILITY``, else ``_TRANSPORT`` (``kernel`` or not).
- ``dmesg -x``: the facility name leads the line (``kern  :warn  : ...``).
- syslog files and ``journalctl`` text (``-o short``, ``short-iso``, ``short-precise``,
  ``short-full``, ``short-monotonic``, ``short-unix``, rsyslog's RFC 3339 stamps): the
  identifier after the host, ``kernel:`` for the kernel and ``NAME[PID]:`` for a process;
  a leading ``<PRI>`` (syslog on the wire) gives the facility itself.
- plain ``dmesg``/``dmesg -T`` and bare text: nothing; such a line counts as the kernel's
  (``dmesg`` reads only the kernel's ring buffer; ``dmesg -x`` shows the facility).
"""

from __future__ import annotations

import re

from hwcheck.kernellog.journal import parse_journal_entry
from hwcheck.kernellog.kmsg_format import parse_kmsg_record
from hwcheck.kernellog.records import KERNEL_FACILITY, USER_FACILITY, KernelRecord

KERNEL_IDENTIFIER = "kernel"

# syslog(3)'s facility names as ``dmesg -x`` prints them (util-linux), with their numbers.
SYSLOG_FACILITIES = {
    "kern": 0,
    "user": 1,
    "mail": 2,
    "daemon": 3,
    "auth": 4,
    "syslog": 5,
    "lpr": 6,
    "news": 7,
    "uucp": 8,
    "cron": 9,
    "authpriv": 10,
    "ftp": 11,
    **{f"local{n}": 16 + n for n in range(8)},
}
_LEVELS = frozenset({"emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"})

_KMSG_HEAD_RE = re.compile(r"[0-9]{1,10},[0-9]{1,20},[0-9]{1,20}(?:,[^;]*)?;", re.ASCII)
_DMESG_X_RE = re.compile(r"(?P<facility>[a-z0-9]{2,8})\s*:(?P<level>[a-z]{3,6})\s*:", re.ASCII)
# The stamps syslog daemons and journalctl's text outputs put before the host name.
_STAMP = (
    r"(?:[A-Z][a-z]{2} [ 0-9]?[0-9] [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?"  # Dec  6 04:40:02
    r"|[A-Z][a-z]{2} [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})? [A-Z]{1,5}"
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]{1,9})?"
    r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?"  # short-iso, RFC 3339
    r"|\[ *[0-9]{1,12}\.[0-9]{1,9}\]"  # short-monotonic
    r"|[0-9]{9,12}\.[0-9]{1,9})"  # short-unix
)
_SYSLOG_HEAD_RE = re.compile(
    r"(?:<(?P<pri>[0-9]{1,3})>)?" + _STAMP + r" +(?P<host>[^\s\[\]]+) +"
    r"(?P<ident>[^\s\[\]:]{1,64})(?:\[(?P<pid>[0-9]{1,10})\])?: ",
    re.ASCII,
)


def _dmesg_x_facility(line: str) -> int | None:
    """The facility a ``dmesg -x`` line leads with; ``None`` when it is not one."""
    match = _DMESG_X_RE.match(line)
    if match is None or match.group("level") not in _LEVELS:
        return None
    return SYSLOG_FACILITIES.get(match.group("facility"))


def _syslog_facility(line: str) -> int | None:
    """The facility a syslog or journalctl text line implies; ``None`` when it has no header.

    The kernel prints without a pid; a process tagged ``kernel[PID]`` is still a process.
    """
    match = _SYSLOG_HEAD_RE.match(line)
    if match is None:
        return None
    pri = match.group("pri")
    if pri is not None:
        return int(pri) >> 3
    if match.group("ident") == KERNEL_IDENTIFIER and match.group("pid") is None:
        return KERNEL_FACILITY
    return USER_FACILITY


def read_log_line(line: str, boot_id: str | None = None) -> KernelRecord:
    """One line of any kernel-log format as a record whose ``facility`` says who wrote it.

    ``text`` is what the parser reads for an Xid: the kmsg record's text, the journal
    entry's ``MESSAGE``, else the whole line. ``raw`` is the line as given. ``facility`` is
    ``None`` when the format does not say (plain ``dmesg``): ``from_user_space`` is then
    False. Never raises: a malformed line is a plain line.
    """
    text = line.rstrip("\r\n")
    if _KMSG_HEAD_RE.match(text):
        record = parse_kmsg_record(text, boot_id)
        if record is not None:
            return record
    if text.startswith("{"):
        try:
            record, _cursor = parse_journal_entry(text, boot_id)
        except (ValueError, RecursionError):
            pass
        else:
            return record
    facility = _dmesg_x_facility(text)
    if facility is None:
        facility = _syslog_facility(text)
    return KernelRecord(text=text, boot_id=boot_id, raw=text, facility=facility)
