"""Pick the host's kernel-log source: ``/dev/kmsg`` first, ``journalctl -k`` when it is closed.

``/dev/kmsg`` needs root or CAP_SYSLOG when ``kernel.dmesg_restrict=1``; journald's copy is
readable by the ``systemd-journal`` group. ``prefer`` forces one of them (``kmsg`` or
``journal``); ``auto`` tries kmsg and falls back, and when both fail the error names both
reasons so the person knows what to grant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from hwcheck.kernellog.errors import KernelLogUnavailable
from hwcheck.kernellog.journal import DEFAULT_JOURNALCTL, JournalctlSource, journal_history
from hwcheck.kernellog.kmsg import DEFAULT_KMSG_PATH, KmsgSource
from hwcheck.kernellog.records import KernelLogCursor, KernelLogSource, KernelRecord

Preference = Literal["auto", "kmsg", "journal"]
PREFERENCES: tuple[str, ...] = ("auto", "kmsg", "journal")


def _check_preference(prefer: str) -> None:
    if prefer not in PREFERENCES:
        raise ValueError(
            f"kernel log source must be one of {', '.join(PREFERENCES)}, got {prefer!r}"
        )


def read_kmsg_history(path: str | Path = DEFAULT_KMSG_PATH, *, boot_id: str) -> list[KernelRecord]:
    """This boot's records still in the ring buffer, read without blocking (stops at EAGAIN)."""
    source = KmsgSource(path, None, boot_id, from_start=True)
    try:
        return source.read_available()
    finally:
        source.close()


def open_host_kernel_log(
    cursor: KernelLogCursor | None,
    boot_id: str,
    *,
    kmsg_path: str | Path = DEFAULT_KMSG_PATH,
    prefer: Preference = "auto",
    from_start: bool = False,
    journalctl: str = DEFAULT_JOURNALCTL,
    journal_cursor: str | None = None,
) -> KernelLogSource:
    """A follower of the host's kernel log resuming after ``cursor`` (see KmsgSource)."""
    _check_preference(prefer)
    kmsg_error: KernelLogUnavailable | None = None
    if prefer in ("auto", "kmsg"):
        try:
            return KmsgSource(kmsg_path, cursor, boot_id, from_start)
        except KernelLogUnavailable as exc:
            if prefer == "kmsg":
                raise
            kmsg_error = exc
    try:
        return JournalctlSource(
            boot_id=boot_id,
            cursor=cursor,
            after_cursor=journal_cursor,
            from_start=from_start,
            journalctl=journalctl,
        )
    except KernelLogUnavailable as exc:
        if kmsg_error is None:
            raise
        raise KernelLogUnavailable(f"{kmsg_error}; and the fallback failed: {exc}") from None


def host_kernel_log_history(
    boot_id: str,
    *,
    kmsg_path: str | Path = DEFAULT_KMSG_PATH,
    prefer: Preference = "auto",
    journalctl: str = DEFAULT_JOURNALCTL,
) -> list[KernelRecord]:
    """This boot's kernel log so far, from /dev/kmsg or else ``journalctl -k -b``."""
    _check_preference(prefer)
    kmsg_error: KernelLogUnavailable | None = None
    if prefer in ("auto", "kmsg"):
        try:
            return read_kmsg_history(kmsg_path, boot_id=boot_id)
        except KernelLogUnavailable as exc:
            if prefer == "kmsg":
                raise
            kmsg_error = exc
    try:
        return journal_history(boot_id, journalctl=journalctl)
    except KernelLogUnavailable as exc:
        if kmsg_error is None:
            raise
        raise KernelLogUnavailable(f"{kmsg_error}; and the fallback failed: {exc}") from None
