"""The NVML backend: ``GpuBackend`` over nvidia-ml-py, reading every card and setting limits.

The work is split by job: ``gateway`` (the only module that touches ``pynvml``: loading,
the timed calls, typed errors), ``cards`` (one card into a ``GpuSnapshot``: what is absent,
what means lost), ``power`` (power limits and their refusals) and ``values`` (units). This module puts them behind the protocol and decides what a
rig-wide failure means: without the card count nothing can be read, so NVML is unavailable
(``BackendUnavailable`` with one line saying what to do).
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from hwcheck.backend import BackendTimeout, BackendUnavailable
from hwcheck.gpu_processes import ProcessNamer
from hwcheck.hostfacts.model import P2pPair
from hwcheck.model import GpuSnapshot, RigSnapshot
from hwcheck.nvml import power as nvml_power
from hwcheck.nvml.calls import Call
from hwcheck.nvml.cards import CardReader
from hwcheck.nvml.errors import NvmlDown, nvml_unavailable
from hwcheck.nvml.gateway import MODULE_MISSING_MESSAGE, NvmlCallError, NvmlGateway
from hwcheck.nvml.p2p import read_p2p
from hwcheck.nvml.values import text

__all__ = ["MODULE_MISSING_MESSAGE", "NvmlBackend"]

logger = logging.getLogger(__name__)


class NvmlBackend:
    """``GpuBackend`` over NVML. ``nvml`` is the ``pynvml`` module (a fake in tests).

    ``import_module`` loads ``pynvml`` when ``nvml`` is None, at first use; it is a
    parameter so the "module missing" path is testable without patching. ``processes``
    names the compute processes NVML lists from ``/proc`` (a recorded tree in tests).
    """

    name = "nvml"

    def __init__(
        self,
        nvml: ModuleType | None = None,
        call_timeout_s: float = 10.0,
        import_module: Callable[[str], ModuleType] = importlib.import_module,
        max_stuck_calls: int = 16,
        processes: ProcessNamer | None = None,
    ) -> None:
        if not (isinstance(call_timeout_s, int | float) and call_timeout_s > 0):
            raise ValueError(f"call_timeout_s must be a positive number, got {call_timeout_s!r}")
        self._gateway = NvmlGateway(nvml, float(call_timeout_s), import_module, max_stuck_calls)
        self._cards = CardReader(self._gateway)
        self._processes = processes or ProcessNamer()

    def device_count(self) -> int:
        """How many cards NVML sees; raises ``BackendUnavailable`` when it cannot say."""
        return int(self._rig_call(Call.DEVICE_COUNT))

    def snapshot(self) -> RigSnapshot:
        """Read every card once; a lost card is reported, never raised."""
        self._gateway.open()
        taken_at = datetime.now(UTC)
        monotonic_s = time.monotonic()
        count = int(self._rig_call(Call.DEVICE_COUNT))
        driver_version = text(self._rig_optional(Call.DRIVER_VERSION))
        nvml_version = text(self._rig_optional(Call.NVML_VERSION))
        cards = tuple(
            self._named(self._cards.read(index, driver_version)) for index in range(count)
        )
        return RigSnapshot(
            taken_at=taken_at,
            monotonic_s=monotonic_s,
            cards=cards,
            driver_version=driver_version,
            nvml_version=nvml_version,
        )

    def _named(self, card: GpuSnapshot) -> GpuSnapshot:
        """The card with its processes' names and containers read from ``/proc``."""
        if not card.processes:
            return card
        return replace(card, processes=self._processes.describe_all(card.processes))

    def p2p_status(self, snapshot: RigSnapshot) -> tuple[P2pPair, ...]:
        """NVML's P2P read status of every pair of the snapshot's live cards."""
        cards = [(card.index, card.pci_bus_id) for card in snapshot.cards if not card.lost]
        return read_p2p(self._gateway, cards)

    def set_power_limit(self, index: int, watts: float) -> None:
        """Set card ``index``'s power limit in W (root; lost at reboot and GPU reset)."""
        nvml_power.set_power_limit(self._gateway, index, watts)

    def close(self) -> None:
        """Shut NVML down once; later calls raise ``BackendUnavailable``."""
        self._gateway.close()

    def _rig_call(self, call: Call) -> Any:
        """A reading without which nothing can be read: any failure is ``BackendUnavailable``."""
        try:
            return self._gateway.call(None, call)
        except BackendTimeout as exc:
            raise nvml_unavailable(NvmlDown.NOT_ANSWERING, str(exc)) from exc
        except NvmlCallError as exc:
            raise BackendUnavailable(
                f"NVML call {exc.call} failed: {exc.text}",
                remedy=nvml_unavailable(NvmlDown.OTHER).remedy,
            ) from exc

    def _rig_optional(self, call: Call) -> Any:
        """A rig-wide reading that may be missing (None), but not stuck."""
        try:
            return self._gateway.call(None, call)
        except BackendTimeout as exc:
            raise nvml_unavailable(NvmlDown.NOT_ANSWERING, str(exc)) from exc
        except NvmlCallError as exc:
            if not exc.error.absent:
                logger.warning("NVML call %s failed: %s", exc.call, exc.text)
            return None
