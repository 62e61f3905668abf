"""Read the kernel's boot id: it changes on every real reboot and on nothing else.

Why: the reboot-required latch clears only when the boot id changes, and the kernel-log
cursor restarts its sequence numbering on a new boot id.
"""

from __future__ import annotations

from pathlib import Path


class BootIdError(Exception):
    """The boot id could not be read; the message names the file and the reason."""


def read_boot_id(proc_root: Path = Path("/proc")) -> str:
    """``<proc_root>/sys/kernel/random/boot_id``, stripped; BootIdError if unreadable/empty."""
    path = proc_root / "sys" / "kernel" / "random" / "boot_id"
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise BootIdError(f"cannot read the boot id from {path}: {reason}") from exc
    if not text:
        raise BootIdError(f"cannot read the boot id from {path}: the file is empty")
    return text
