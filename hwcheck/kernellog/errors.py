"""Why the kernel log cannot be read, phrased as the one line a person acts on."""

from __future__ import annotations

KMSG_PERMISSION_HINT = "run as root or grant CAP_SYSLOG (kernel.dmesg_restrict=1)"


class KernelLogUnavailable(Exception):
    """No source can read the kernel log (permissions, missing program, source ended).

    The message is one line saying what failed and what to do about it.
    """
