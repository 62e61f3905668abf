"""Kernel-log records, the resume cursor and the protocol every source follows.

A source (``/dev/kmsg``, ``journalctl -k``, a file) turns the kernel log into
``KernelRecord`` objects; the pure parser then finds Xids in ``record.text``. Sources
that know sequence numbers resume from a persisted ``KernelLogCursor`` so a daemon
restart neither loses nor double counts a record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

# syslog facility 0: records the kernel itself printed. /dev/kmsg also takes writes from
# any root process; those carry another facility (1, user, unless they say otherwise).
KERNEL_FACILITY = 0
# What a record is counted as when its source only says "not the kernel" (a journal entry
# of another transport, a syslog line under a process's identifier): syslog's ``user``.
USER_FACILITY = 1


@dataclass(frozen=True, slots=True)
class KernelRecord:
    """One kernel-log record: its text (without the kmsg prefix) and where it sits.

    ``facility`` is the syslog facility when the source knows it (``/dev/kmsg``'s prefix
    is ``(facility << 3) | level``; journald's ``SYSLOG_FACILITY``), ``None`` for a plain
    text log.
    """

    text: str
    seq: int | None = None
    boot_id: str | None = None
    timestamp_usec: int | None = None
    raw: str = ""
    facility: int | None = None

    @property
    def from_user_space(self) -> bool:
        """True when the source says a process, not the kernel, wrote this record.

        Such a record is never an Xid, on the live path or in ``xid scan``: a test or a
        prank writing ``NVRM: Xid ...`` into /dev/kmsg must not make a rig critical.
        ``origin.read_log_line`` reads the facility from every text format.
        """
        return self.facility is not None and self.facility != KERNEL_FACILITY


@dataclass(frozen=True, slots=True)
class KernelLogCursor:
    """The last record handled: same ``boot_id`` means skip ``seq <= last_seq``."""

    boot_id: str
    last_seq: int


class KernelLogSource(Protocol):
    """A followable kernel log.

    ``read_available`` never blocks and returns every record not yet returned (and, for
    a resumed source, not at or before the cursor). ``wait`` blocks up to ``timeout_s``
    until more may be readable, so a follower thread is event-driven, not polled.
    """

    name: str

    def read_available(self) -> list[KernelRecord]:
        """Every new record, oldest first; never blocks."""
        ...

    def wait(self, timeout_s: float) -> bool:
        """Block until records may be readable (True) or the timeout passed (False)."""
        ...

    @property
    def lost_records(self) -> int:
        """Records the kernel overwrote before we could read them (kmsg ``EPIPE`` gaps)."""
        ...

    def close(self) -> None:
        """Release the file descriptor or child process; safe to call twice."""
        ...
