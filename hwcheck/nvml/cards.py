"""Read one card through the NVML gateway into a ``GpuSnapshot``.

Each reading has one of three outcomes, because the daemon reacts to them differently:

- *not available* (``NotSupported`` and kin): normal on CMP cards, the field is ``None``;
- *lost* (``GpuIsLost``, ``ResetRequired``, ``Unknown``, a call that does not return): an
  incident, the card comes back with ``lost=True`` and a reason, and the rest of the rig is
  still read;
- anything else: the field is ``None`` and a warning is logged once per card, call and code.

A lost card still says which card it is: the identity last read is remembered per index.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from typing import Any

from hwcheck.backend import BackendTimeout
from hwcheck.model import GpuProcess, GpuSnapshot, LostKind
from hwcheck.nvml import values
from hwcheck.nvml.calls import Call, Field
from hwcheck.nvml.gateway import NvmlCallError, NvmlError, NvmlGateway

logger = logging.getLogger(__name__)

# NVML's verdict on a lost card, kept typed so nobody searches its words for "reset".
_LOST_KINDS = {
    NvmlError.GPU_IS_LOST: LostKind.GPU_IS_LOST,
    NvmlError.RESET_REQUIRED: LostKind.RESET_REQUIRED,
    NvmlError.TIMEOUT: LostKind.NOT_ANSWERING,
}


class _CardLost(Exception):
    """Internal: stop reading this card, it is lost (never leaves this module)."""

    def __init__(self, reason: str, kind: LostKind) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind

    @classmethod
    def of(cls, exc: NvmlCallError) -> _CardLost:
        """The loss NVML reported with ``exc``."""
        return cls(exc.text, _LOST_KINDS.get(exc.error, LostKind.UNKNOWN))

    @classmethod
    def timed_out(cls, reason: str) -> _CardLost:
        """A call that did not return in time."""
        return cls(reason, LostKind.NOT_ANSWERING)


@dataclass(frozen=True, slots=True)
class _Identity:
    """What a card was last known as, so a lost card still says which one it is."""

    pci_bus_id: str = ""
    uuid: str = ""
    name: str = ""
    serial: str | None = None


class CardReader:
    """Reads cards one at a time; remembers identities and which warnings were logged."""

    def __init__(self, gateway: NvmlGateway) -> None:
        self._gateway = gateway
        self._lock = threading.Lock()
        self._identities: dict[int, _Identity] = {}
        self._warned: set[tuple[int, str, str]] = set()

    def read(self, index: int, driver_version: str | None) -> GpuSnapshot:
        """Card ``index`` as one snapshot; a lost card is reported, never raised."""
        stuck = self._gateway.stuck_call(index)
        if stuck is not None:
            reason = f"{stuck.reason()} and has not returned"
            return self._lost_card(index, reason, LostKind.NOT_ANSWERING)
        try:
            handle = self._handle(index)
            return GpuSnapshot(
                index=index,
                driver_version=driver_version,
                **self._identity(index, handle),
                **self._memory(index, handle),
                **self._power(index, handle),
                **self._clocks(index, handle),
                **self._thermal(index, handle),
                **self._pcie(index, handle),
                **self._activity(index, handle),
                **self._remapped_rows(index, handle),
                recovery_action=values.optional_int(
                    self._field(index, handle, Field.GPU_RECOVERY_ACTION)
                ),
            )
        except _CardLost as lost:
            logger.warning("card %d is lost: %s", index, lost.reason)
            return self._lost_card(index, lost.reason, lost.kind)

    def _lost_card(self, index: int, reason: str, kind: LostKind) -> GpuSnapshot:
        with self._lock:
            known = self._identities.get(index, _Identity())
        return GpuSnapshot(
            index=index,
            pci_bus_id=known.pci_bus_id,
            uuid=known.uuid,
            name=known.name,
            serial=known.serial,
            lost=True,
            lost_reason=reason,
            lost_kind=kind,
        )

    def _handle(self, index: int) -> Any:
        """The card's handle; a card NVML will not hand out cannot be read at all."""
        try:
            return self._gateway.call(index, Call.HANDLE_BY_INDEX, index)
        except BackendTimeout as exc:
            raise _CardLost.timed_out(self._gateway.timeout_reason(index, exc)) from exc
        except NvmlCallError as exc:
            raise _CardLost.of(exc) from exc

    def _read(self, index: int, calls: tuple[Call, ...], *args: Any) -> Any:
        """One reading of card ``index``: its value, or None when it is not available.

        With more than one call, each is tried in turn while the driver lacks it (renamed
        calls: clock *event* vs *throttle* reasons, ``GetTemperature`` vs ``...V``).
        """
        for position, call in enumerate(calls):
            try:
                return self._gateway.call(index, call, *args)
            except NvmlCallError as exc:
                last = position == len(calls) - 1
                if exc.error is NvmlError.FUNCTION_NOT_FOUND and not last:
                    continue
                self._judge(index, exc)
                return None
            except BackendTimeout as exc:
                raise _CardLost.timed_out(self._gateway.timeout_reason(index, exc)) from exc
        return None

    def _field(self, index: int, handle: Any, field: Field) -> float | int | None:
        try:
            return self._gateway.field_value(index, handle, field)
        except NvmlCallError as exc:
            self._judge(index, exc)
            return None
        except BackendTimeout as exc:
            raise _CardLost.timed_out(self._gateway.timeout_reason(index, exc)) from exc

    def _judge(self, index: int, exc: NvmlCallError) -> None:
        """A failed reading: lost raises, absent is silent, anything else warns once."""
        if exc.error.lost:
            raise _CardLost.of(exc) from exc
        if exc.error.absent:
            return
        key = (index, exc.call, exc.text)
        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        logger.warning("card %d: NVML call %s failed: %s", index, exc.call, exc.text)

    def _remember(self, index: int, **seen: str | None) -> None:
        """Update what card ``index`` is known as with the identity fields just read."""
        with self._lock:
            known = self._identities.get(index, _Identity())
            updates = {key: value for key, value in seen.items() if value}
            self._identities[index] = replace(known, **updates)

    def _identity(self, index: int, handle: Any) -> dict[str, Any]:
        def read_text(call: Call) -> str | None:
            return values.text(self._read(index, (call,), handle))

        pci = self._read(index, (Call.PCI_INFO,), handle)
        self._remember(
            index, pci_bus_id=None if pci is None else values.bus_id(values.text(pci.busId))
        )
        self._remember(index, uuid=read_text(Call.UUID))
        name = read_text(Call.NAME)
        serial = read_text(Call.SERIAL)
        self._remember(index, name=name, serial=serial)
        vbios = read_text(Call.VBIOS_VERSION)
        with self._lock:
            known = self._identities[index]
        return {
            "pci_bus_id": known.pci_bus_id,
            "uuid": known.uuid,
            "name": known.name,
            "serial": serial,
            "pci_device_id": None if pci is None else (int(pci.pciDeviceId) >> 16) & 0xFFFF,
            "vbios_version": vbios,
        }

    def _memory(self, index: int, handle: Any) -> dict[str, Any]:
        bar1 = self._read(index, (Call.BAR1_MEMORY,), handle)
        bar1_mib = {} if bar1 is None else {"bar1_total_mib": values.mib(bar1.bar1Total)}
        memory = self._read(index, (Call.MEMORY_INFO,), handle)
        if memory is None:
            return bar1_mib
        return {
            **bar1_mib,
            "memory_total_mib": values.mib(memory.total),
            "memory_used_mib": values.mib(memory.used),
        }

    def _power(self, index: int, handle: Any) -> dict[str, Any]:
        def read_w(call: Call) -> float | None:
            return values.watts(self._read(index, (call,), handle))

        constraints = self._read(index, (Call.POWER_LIMIT_CONSTRAINTS,), handle)
        min_mw, max_mw = (None, None) if constraints is None else constraints
        return {
            "power_draw_w": read_w(Call.POWER_USAGE),
            "power_limit_w": read_w(Call.POWER_LIMIT),
            "power_enforced_limit_w": read_w(Call.ENFORCED_POWER_LIMIT),
            "power_default_limit_w": read_w(Call.DEFAULT_POWER_LIMIT),
            "power_min_limit_w": values.watts(min_mw),
            "power_max_limit_w": values.watts(max_mw),
            "energy_total_mj": values.optional_int(self._read(index, (Call.TOTAL_ENERGY,), handle)),
        }

    def _clocks(self, index: int, handle: Any) -> dict[str, Any]:
        def read_int(*calls: Call) -> int | None:
            return values.optional_int(self._read(index, calls, handle))

        return {
            "clock_event_reasons": read_int(Call.CLOCK_EVENT_REASONS, Call.CLOCK_THROTTLE_REASONS),
            "sm_clock_mhz": read_int(Call.SM_CLOCK),
            "memory_clock_mhz": read_int(Call.MEMORY_CLOCK),
            "sm_clock_max_mhz": read_int(Call.SM_CLOCK_MAX),
            "memory_clock_max_mhz": read_int(Call.MEMORY_CLOCK_MAX),
        }

    def _thermal(self, index: int, handle: Any) -> dict[str, Any]:
        temperature = self._read(index, (Call.TEMPERATURE, Call.TEMPERATURE_V), handle)
        return {
            "temperature_c": values.optional_float(temperature),
            "memory_temperature_c": values.optional_float(
                self._field(index, handle, Field.MEMORY_TEMPERATURE)
            ),
            "fan_speed_pct": values.optional_int(self._read(index, (Call.FAN_SPEED,), handle)),
        }

    def _pcie(self, index: int, handle: Any) -> dict[str, Any]:
        def read_int(call: Call) -> int | None:
            return values.optional_int(self._read(index, (call,), handle))

        return {
            "pcie_gen_current": read_int(Call.PCIE_GEN_CURRENT),
            "pcie_width_current": read_int(Call.PCIE_WIDTH_CURRENT),
            "pcie_gen_max": read_int(Call.PCIE_GEN_MAX),
            "pcie_width_max": read_int(Call.PCIE_WIDTH_MAX),
            "pcie_replay_count": read_int(Call.PCIE_REPLAY_COUNTER),
            "persistence_mode": self._read(index, (Call.PERSISTENCE_ENABLED,), handle),
        }

    def _remapped_rows(self, index: int, handle: Any) -> dict[str, Any]:
        """Row remapping as NVML keeps it (all None where the card does not report it)."""
        found = self._read(index, (Call.REMAPPED_ROWS,), handle)
        if found is None:
            return {}
        correctable, uncorrectable, pending, failed = found
        return {
            "remapped_rows_correctable": values.optional_int(correctable),
            "remapped_rows_uncorrectable": values.optional_int(uncorrectable),
            "row_remap_pending": bool(pending),
            "row_remap_failed": bool(failed),
        }

    def _activity(self, index: int, handle: Any) -> dict[str, Any]:
        """Utilisation, PCIe traffic and compute processes: what nvitop shows per card."""

        def read_int(call: Call) -> int | None:
            return values.optional_int(self._read(index, (call,), handle))

        rates = self._read(index, (Call.UTILIZATION_RATES,), handle)
        listed = self._read(index, (Call.COMPUTE_PROCESSES,), handle)
        processes = None
        if listed is not None:
            processes = tuple(
                GpuProcess(
                    pid=int(entry.pid),
                    used_memory_mib=(
                        None
                        if getattr(entry, "usedGpuMemory", None) is None
                        else values.mib(entry.usedGpuMemory)
                    ),
                )
                for entry in listed
            )
        return {
            "utilization_gpu_pct": None if rates is None else values.optional_int(rates.gpu),
            "utilization_memory_pct": None if rates is None else values.optional_int(rates.memory),
            "pcie_tx_kib_s": read_int(Call.PCIE_TX_THROUGHPUT),
            "pcie_rx_kib_s": read_int(Call.PCIE_RX_THROUGHPUT),
            "processes": processes,
        }
