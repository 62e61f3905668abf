"""The ``GpuBackend`` protocol and its typed errors.

The NVML backend and the simulated backend both satisfy this protocol, so the checks,
the CLI and the daemon never know which one they hold (the backend is handed in from
outside, gpustack-style).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from hwcheck.model import RigSnapshot


class BackendError(Exception):
    """Base class of every error a backend raises on purpose."""


class BackendUnavailable(BackendError):
    """The backend cannot start at all (no NVML library, driver not loaded).

    The message says what is missing in one line; ``remedy`` what a person does about
    it (empty when there is nothing to say beyond the message).
    """

    def __init__(self, message: str, remedy: str = "") -> None:
        super().__init__(message)
        self.remedy = remedy


class BackendTimeout(BackendError):
    """A backend call did not return in time (a sick GPU can block NVML for 45 s)."""


class CardLostError(BackendError):
    """The card with this index stopped answering (GPU lost, reset required)."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"card {index} is lost: {reason}")
        self.index = index
        self.reason = reason


class PowerLimitError(BackendError):
    """Setting a power limit failed; the message says why (permission, range)."""


@runtime_checkable
class GpuBackend(Protocol):
    """Reads every card and sets power limits.

    ``snapshot()`` never raises for one sick card: that card comes back with
    ``lost=True``. It raises ``BackendUnavailable`` when nothing can be read at all.
    """

    name: str

    def snapshot(self) -> RigSnapshot:
        """Read every card once."""
        ...

    def set_power_limit(self, index: int, watts: float) -> None:
        """Set card ``index``'s power limit (root); raises ``PowerLimitError``."""
        ...

    def close(self) -> None:
        """Release the library; safe to call twice."""
        ...
