"""Kernel-log records, the resume cursor and the protocol every source follows.

A source (``/dev/kmsg``, ``journalctl -k``, a file) turns the kernel log into
``KernelRecord`` objects; the pure parser then finds Xids in ``record.text``. Sources
that know sequence numbers resume from a persisted ``KernelLogCursor`` so a daemon
restart neither loses nor double counts a record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class KernelRecord:
    """One kernel-log record: its text (without the kmsg prefix) and where it sits."""

    text: str
    seq: int | None = None
    boot_id: str | None = None
    timestamp_usec: int | None = None
    raw: str = ""


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
