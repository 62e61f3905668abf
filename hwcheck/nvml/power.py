"""Set a card's power limit through the NVML gateway, with errors a person can act on.

NVML answers a refused limit with bare error codes; this turns them into one line that says
why (no root, not supported, outside the allowed range, no such card, card lost).
"""

from __future__ import annotations

import math
from typing import Any

from hwcheck.backend import BackendError, CardLostError, PowerLimitError
from hwcheck.nvml.calls import Call
from hwcheck.nvml.gateway import NvmlCallError, NvmlError, NvmlGateway


def check_power_request(index: int, watts: float) -> None:
    """Refuse a request no card could take before NVML is asked."""
    if isinstance(watts, bool) or not isinstance(watts, int | float):
        raise PowerLimitError(f"power limit must be a number of watts, got {watts!r}")
    if not (math.isfinite(watts) and watts > 0):
        raise PowerLimitError(f"power limit must be a positive number of watts, got {watts}")
    if index < 0:
        raise PowerLimitError(f"card index must be 0 or more, got {index}")


def set_power_limit(gateway: NvmlGateway, index: int, watts: float) -> None:
    """Set card ``index``'s power limit in W (root; lost at reboot and GPU reset)."""
    check_power_request(index, watts)
    gateway.open()
    stuck = gateway.stuck_call(index)
    if stuck is not None:
        raise CardLostError(index, f"{stuck.reason()} and has not returned")
    handle = _handle(gateway, index)
    try:
        gateway.call(index, Call.SET_POWER_LIMIT, handle, round(watts * 1000))
    except NvmlCallError as exc:
        raise _refusal(gateway, index, watts, handle, exc) from exc


def _handle(gateway: NvmlGateway, index: int) -> Any:
    try:
        return gateway.call(index, Call.HANDLE_BY_INDEX, index)
    except NvmlCallError as exc:
        if exc.error in (NvmlError.INVALID_ARGUMENT, NvmlError.NOT_FOUND):
            raise PowerLimitError(f"there is no card {index}") from exc
        if exc.error.lost:
            raise CardLostError(index, exc.text) from exc
        raise PowerLimitError(f"cannot open card {index}: {exc.text}") from exc


def _refusal(
    gateway: NvmlGateway, index: int, watts: float, handle: Any, exc: NvmlCallError
) -> BackendError:
    if exc.error is NvmlError.NO_PERMISSION:
        return PowerLimitError(
            f"setting the power limit of card {index} needs root (NVML: no permission); "
            "run fleetctl/fleetd as root"
        )
    if exc.error is NvmlError.NOT_SUPPORTED:
        return PowerLimitError(f"card {index} does not support power limits")
    if exc.error is NvmlError.INVALID_ARGUMENT:
        return PowerLimitError(
            f"card {index} refused a power limit of {watts:g} W: "
            f"{_allowed_range(gateway, index, handle)}"
        )
    if exc.error.lost:
        return CardLostError(index, exc.text)
    return PowerLimitError(
        f"setting the power limit of card {index} to {watts:g} W failed: {exc.text}"
    )


def _allowed_range(gateway: NvmlGateway, index: int, handle: Any) -> str:
    try:
        min_mw, max_mw = gateway.call(index, Call.POWER_LIMIT_CONSTRAINTS, handle)
    except BackendError as exc:
        return f"its allowed range could not be read ({exc})"
    except NvmlCallError as exc:
        return f"its allowed range could not be read ({exc.text})"
    return f"it allows {min_mw / 1000:g}..{max_mw / 1000:g} W"
