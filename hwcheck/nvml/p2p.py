"""Read NVML's P2P read status for every pair of cards, through the gateway.

The stock driver's P2P path "reports success" and moves zero bytes, and a rig booted
without its patched kernel reads "not supported" on every pair: either way the next
tensor-parallel start hangs at NCCL init. The status is a value here, never an error:
"not supported" is what many rigs answer, and a card that cannot answer (lost, stuck)
reads ``unknown`` for its pairs while the snapshot reports it lost.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from hwcheck.backend import BackendTimeout
from hwcheck.hostfacts.model import P2pPair, P2pStatus, pair_key
from hwcheck.nvml.calls import Call
from hwcheck.nvml.gateway import NvmlCallError, NvmlGateway


def _handle(gateway: NvmlGateway, index: int) -> Any | None:
    if gateway.stuck_call(index) is not None:
        return None
    try:
        return gateway.call(index, Call.HANDLE_BY_INDEX, index)
    except (NvmlCallError, BackendTimeout):
        return None


def _status(gateway: NvmlGateway, index: int, first: Any, second: Any) -> P2pStatus:
    try:
        status = gateway.call(index, Call.P2P_READ_STATUS, first, second)
    except NvmlCallError as exc:
        return P2pStatus.NOT_SUPPORTED if exc.error.absent else P2pStatus.UNKNOWN
    except BackendTimeout:
        return P2pStatus.UNKNOWN
    return P2pStatus(status)


def read_p2p(gateway: NvmlGateway, cards: Sequence[tuple[int, str]]) -> tuple[P2pPair, ...]:
    """The read status of each pair of ``cards`` (``(NVML index, PCI address)``)."""
    handles = {index: _handle(gateway, index) for index, _ in cards}
    pairs: list[P2pPair] = []
    for (index_a, bus_a), (index_b, bus_b) in itertools.combinations(cards, 2):
        first, second = handles[index_a], handles[index_b]
        if first is None or second is None:
            status = P2pStatus.UNKNOWN
        else:
            status = _status(gateway, index_a, first, second)
        a, b = pair_key(bus_a, bus_b)
        pairs.append(P2pPair(a, b, status))
    return tuple(sorted(pairs, key=lambda pair: (pair.a, pair.b)))
