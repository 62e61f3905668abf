"""The kernel's read of /dev/kmsg, scripted: EPIPE and EIO cannot be forced on a real ring."""

from __future__ import annotations

import errno
from collections import deque
from collections.abc import Iterable


class ScriptedKernel:
    """Stands in for read(2) on /dev/kmsg: returns records, raises EPIPE/EAGAIN/EIO."""

    def __init__(self, steps: Iterable[bytes | OSError]) -> None:
        self.steps: deque[bytes | OSError] = deque(steps)

    def add(self, *steps: bytes | OSError) -> None:
        self.steps.extend(steps)

    def __call__(self, fd: int) -> bytes:
        assert fd >= 0
        if not self.steps:
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        step = self.steps.popleft()
        if isinstance(step, OSError):
            raise step
        return step
