"""A fake ``pynvml`` module for the NVML backend's tests.

It is built from the real installed module (handed in, so this file needs no banned
import): every ``NVML_*`` constant and every ``NVMLError*`` class is copied from it, and the
structures it returns (memory info, PCI info, field values) are the real ctypes ones. Only
the answers are recorded: the defaults are the CMP 170HX card of docs/domain.md "One recorded card".

Faults are injected per card and per call name: ``errors`` raises the given real NVML
exception class, ``blocks`` makes the call wait on an event (a GPU stuck in the driver).
"""

from __future__ import annotations

import threading
import types
from dataclasses import dataclass, field
from typing import Any

MIB = 1024 * 1024
BLOCK_LIMIT_S = 60.0  # a blocked fake call gives up after this, so a broken test cannot hang


@dataclass
class FakeCard:
    """One card's recorded answers (mW, bytes, MHz, C as NVML reports them)."""

    pci_bus_id: str = "00000000:01:00.0"
    pci_device_id: int = 0x20C210DE
    uuid: str = "GPU-6c9d7a8e-1f0b-4b5e-9a55-3f1c2d4e5a01"
    name: str = "NVIDIA Graphics Device"
    serial: str | None = "1324021012345"
    vbios_version: str | None = "92.00.6D.00.0A"
    memory_total_bytes: int = 65536 * MIB
    memory_used_bytes: int = 459 * MIB
    power_usage_mw: int = 152_345
    total_energy_mj: int = 987_654_321
    power_limit_mw: int = 180_000
    enforced_power_limit_mw: int = 180_000
    default_power_limit_mw: int = 250_000
    min_power_limit_mw: int = 100_000
    max_power_limit_mw: int = 300_000
    clock_event_reasons: int | None = 0
    sm_clock_mhz: int = 1410
    memory_clock_mhz: int = 1215
    sm_clock_max_mhz: int | None = 1410
    memory_clock_max_mhz: int | None = 1728  # 1,458 on an old VBIOS
    bar1_total_bytes: int | None = 65536 * MIB  # the bridge-window patch's 64 GiB BAR1
    pcie_replay_count: int | None = 0
    temperature_c: int | None = 61
    memory_temperature_c: int | None = 68  # None: the driver does not report the field
    recovery_action: int | None = 0  # None: the driver predates field 230
    pcie_gen_current: int = 2
    pcie_width_current: int = 4
    pcie_gen_max: int = 2
    pcie_width_max: int = 4
    persistence_enabled: bool = True
    fan_speed_pct: int | None = None  # passive card: NotSupported
    utilization_gpu_pct: int | None = 87  # None: NotSupported
    utilization_memory_pct: int = 41
    pcie_tx_kib_s: int | None = 2_048  # None: NotSupported
    pcie_rx_kib_s: int = 15_360
    # (correctable, uncorrectable, pending, failure) as nvmlDeviceGetRemappedRows answers;
    # None: NotSupported, as on a CMP 170HX (no ECC reporting).
    remapped_rows: tuple[int, int, int, int] | None = None
    # (pid, used bytes or None as NVML_VALUE_NOT_AVAILABLE); None: NotSupported
    processes: list[tuple[int, int | None]] | None = field(
        default_factory=lambda: [(4242, 55_705 * MIB)]
    )
    strings_as_bytes: bool = False  # older nvidia-ml-py returned bytes
    errors: dict[str, type[Exception]] = field(default_factory=dict)
    blocks: dict[str, threading.Event] = field(default_factory=dict)


def cmp170hx(slot: int, **changes: Any) -> FakeCard:
    """The recorded card in PCI bus ``slot + 1`` with its own UUID and serial."""
    values: dict[str, Any] = {
        "pci_bus_id": f"00000000:{slot + 1:02X}:00.0",
        "uuid": f"GPU-6c9d7a8e-1f0b-4b5e-9a55-3f1c2d4e5a{slot:02x}",
        "serial": f"13240210123{slot:02d}",
    }
    values.update(changes)
    return FakeCard(**values)


class FakeNvml(types.ModuleType):
    """Stands in for ``pynvml``: same function names, constants and exception classes."""

    def __init__(
        self,
        real: types.ModuleType,
        cards: list[FakeCard],
        *,
        driver_version: str = "570.172.08",
        nvml_version: str = "12.570.172.08",
        init_error: type[Exception] | None = None,
        omitted: tuple[str, ...] = (),
        p2p_status: int | None = None,
    ) -> None:
        super().__init__("fake_pynvml")
        for attr in dir(real):
            if attr.startswith(("NVML_", "NVMLError")):
                setattr(self, attr, getattr(real, attr))
        self.real = real
        self.cards = cards
        self.driver_version = driver_version
        self.nvml_version = nvml_version
        self.init_error = init_error
        self.init_gate: threading.Event | None = None
        self.rig_errors: dict[str, type[Exception]] = {}
        self.omitted = frozenset(omitted)
        # Every pair's P2P read status (NVML_P2P_STATUS_OK unless given); per pair overrides.
        self.p2p_status = real.NVML_P2P_STATUS_OK if p2p_status is None else p2p_status
        self.p2p_pairs: dict[frozenset[int], int] = {}
        self.lock = threading.Lock()
        self.initialised = False
        self.init_calls = 0
        self.shutdown_calls = 0
        self.calls: list[tuple[str, int | None]] = []
        self.finished: list[tuple[str, int | None]] = []
        self.limits_set: list[tuple[int, int]] = []

    def __getattribute__(self, name: str) -> Any:
        # Hide functions an older nvidia-ml-py does not have (AttributeError, as for real).
        if not name.startswith("_") and name in super().__getattribute__("__dict__").get(
            "omitted", ()
        ):
            raise AttributeError(f"module 'fake_pynvml' has no attribute {name!r}")
        return super().__getattribute__(name)

    # -- plumbing --------------------------------------------------------------------

    def count(self, call: str, index: int | None = None) -> int:
        """How many times ``call`` was made (on card ``index`` when given)."""
        with self.lock:
            return sum(1 for name, i in self.calls if name == call and index in (None, i))

    def finished_count(self, call: str) -> int:
        with self.lock:
            return sum(1 for name, _ in self.finished if name == call)

    def _rig(self, call: str) -> None:
        with self.lock:
            self.calls.append((call, None))
        if not self.initialised:
            raise self.NVMLError_Uninitialized()
        error = self.rig_errors.get(call)
        if error is not None:
            raise error()

    def _enter(self, call: str, handle: FakeCard) -> FakeCard:
        index = self.cards.index(handle)
        with self.lock:
            self.calls.append((call, index))
        if not self.initialised:
            raise self.NVMLError_Uninitialized()
        gate = handle.blocks.get(call)
        if gate is not None and not gate.wait(BLOCK_LIMIT_S):
            raise AssertionError(f"fake {call} on card {index} was never released")
        with self.lock:
            self.finished.append((call, index))
        error = handle.errors.get(call)
        if error is not None:
            raise error()
        return handle

    def _unsupported_if_none(self, value: Any) -> Any:
        if value is None:
            raise self.NVMLError_NotSupported()
        return value

    @staticmethod
    def _string(card: FakeCard, value: str) -> str | bytes:
        return value.encode() if card.strings_as_bytes else value

    # -- library and system ----------------------------------------------------------

    def nvmlInit(self) -> None:
        with self.lock:
            self.init_calls += 1
        if self.init_gate is not None and not self.init_gate.wait(BLOCK_LIMIT_S):
            raise AssertionError("fake nvmlInit was never released")
        if self.init_error is not None:
            raise self.init_error()
        self.initialised = True

    def nvmlShutdown(self) -> None:
        with self.lock:
            self.shutdown_calls += 1
        if not self.initialised:
            raise self.NVMLError_Uninitialized()
        self.initialised = False

    def nvmlSystemGetDriverVersion(self) -> str:
        self._rig("nvmlSystemGetDriverVersion")
        return self.driver_version

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._rig("nvmlSystemGetNVMLVersion")
        return self.nvml_version

    def nvmlDeviceGetCount(self) -> int:
        self._rig("nvmlDeviceGetCount")
        return len(self.cards)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeCard:
        self._rig("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.cards):
            raise self.NVMLError_InvalidArgument()
        return self._enter("nvmlDeviceGetHandleByIndex", self.cards[index])

    # -- identity --------------------------------------------------------------------

    def nvmlDeviceGetPciInfo(self, handle: FakeCard) -> Any:
        card = self._enter("nvmlDeviceGetPciInfo", handle)
        info = self.real.nvmlPciInfo_t()
        info.busId = card.pci_bus_id.encode()
        info.busIdLegacy = card.pci_bus_id[4:].encode()
        info.pciDeviceId = card.pci_device_id
        return info

    def nvmlDeviceGetUUID(self, handle: FakeCard) -> str | bytes:
        card = self._enter("nvmlDeviceGetUUID", handle)
        return self._string(card, card.uuid)

    def nvmlDeviceGetName(self, handle: FakeCard) -> str | bytes:
        card = self._enter("nvmlDeviceGetName", handle)
        return self._string(card, card.name)

    def nvmlDeviceGetSerial(self, handle: FakeCard) -> str | bytes:
        card = self._enter("nvmlDeviceGetSerial", handle)
        return self._string(card, self._unsupported_if_none(card.serial))

    def nvmlDeviceGetVbiosVersion(self, handle: FakeCard) -> str | bytes:
        card = self._enter("nvmlDeviceGetVbiosVersion", handle)
        return self._string(card, self._unsupported_if_none(card.vbios_version))

    # -- memory, power, clocks -------------------------------------------------------

    def nvmlDeviceGetMemoryInfo(self, handle: FakeCard) -> Any:
        card = self._enter("nvmlDeviceGetMemoryInfo", handle)
        memory = self.real.c_nvmlMemory_t()
        memory.total = card.memory_total_bytes
        memory.used = card.memory_used_bytes
        memory.free = card.memory_total_bytes - card.memory_used_bytes
        return memory

    def nvmlDeviceGetPowerUsage(self, handle: FakeCard) -> int:
        return self._enter("nvmlDeviceGetPowerUsage", handle).power_usage_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: FakeCard) -> int:
        return self._enter("nvmlDeviceGetTotalEnergyConsumption", handle).total_energy_mj

    def nvmlDeviceGetPowerManagementLimit(self, handle: FakeCard) -> int:
        return self._enter("nvmlDeviceGetPowerManagementLimit", handle).power_limit_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: FakeCard) -> int:
        return self._enter("nvmlDeviceGetEnforcedPowerLimit", handle).enforced_power_limit_mw

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: FakeCard) -> int:
        card = self._enter("nvmlDeviceGetPowerManagementDefaultLimit", handle)
        return card.default_power_limit_mw

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: FakeCard) -> list[int]:
        card = self._enter("nvmlDeviceGetPowerManagementLimitConstraints", handle)
        return [card.min_power_limit_mw, card.max_power_limit_mw]

    def nvmlDeviceSetPowerManagementLimit(self, handle: FakeCard, limit: int) -> None:
        card = self._enter("nvmlDeviceSetPowerManagementLimit", handle)
        if not card.min_power_limit_mw <= limit <= card.max_power_limit_mw:
            raise self.NVMLError_InvalidArgument()
        card.power_limit_mw = card.enforced_power_limit_mw = limit
        with self.lock:
            self.limits_set.append((self.cards.index(card), limit))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: FakeCard) -> int:
        card = self._enter("nvmlDeviceGetCurrentClocksEventReasons", handle)
        return int(self._unsupported_if_none(card.clock_event_reasons))

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: FakeCard) -> int:
        card = self._enter("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        return int(self._unsupported_if_none(card.clock_event_reasons))

    def nvmlDeviceGetClockInfo(self, handle: FakeCard, clock_type: int) -> int:
        card = self._enter("nvmlDeviceGetClockInfo", handle)
        if clock_type == self.NVML_CLOCK_SM:
            return card.sm_clock_mhz
        if clock_type == self.NVML_CLOCK_MEM:
            return card.memory_clock_mhz
        raise self.NVMLError_InvalidArgument()

    def nvmlDeviceGetMaxClockInfo(self, handle: FakeCard, clock_type: int) -> int:
        card = self._enter("nvmlDeviceGetMaxClockInfo", handle)
        if clock_type == self.NVML_CLOCK_SM:
            return int(self._unsupported_if_none(card.sm_clock_max_mhz))
        if clock_type == self.NVML_CLOCK_MEM:
            return int(self._unsupported_if_none(card.memory_clock_max_mhz))
        raise self.NVMLError_InvalidArgument()

    def nvmlDeviceGetRemappedRows(self, handle: FakeCard) -> tuple[int, int, int, int]:
        card = self._enter("nvmlDeviceGetRemappedRows", handle)
        rows: tuple[int, int, int, int] = self._unsupported_if_none(card.remapped_rows)
        return rows

    def nvmlDeviceGetBAR1MemoryInfo(self, handle: FakeCard) -> Any:
        card = self._enter("nvmlDeviceGetBAR1MemoryInfo", handle)
        total = self._unsupported_if_none(card.bar1_total_bytes)
        bar1 = self.real.c_nvmlBAR1Memory_t()
        bar1.bar1Total = total
        bar1.bar1Used = 2 * MIB
        bar1.bar1Free = total - 2 * MIB
        return bar1

    # -- thermal, PCIe, modes, fields ------------------------------------------------

    def nvmlDeviceGetTemperature(self, handle: FakeCard, sensor: int) -> int:
        card = self._enter("nvmlDeviceGetTemperature", handle)
        if sensor != self.NVML_TEMPERATURE_GPU:
            raise self.NVMLError_InvalidArgument()
        return int(self._unsupported_if_none(card.temperature_c))

    def nvmlDeviceGetTemperatureV(self, handle: FakeCard, sensor: int) -> int:
        card = self._enter("nvmlDeviceGetTemperatureV", handle)
        if sensor != self.NVML_TEMPERATURE_GPU:
            raise self.NVMLError_InvalidArgument()
        return int(self._unsupported_if_none(card.temperature_c))

    def nvmlDeviceGetFanSpeed(self, handle: FakeCard) -> int:
        card = self._enter("nvmlDeviceGetFanSpeed", handle)
        return int(self._unsupported_if_none(card.fan_speed_pct))

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: FakeCard) -> int:
        return self._enter("nvmlDeviceGetCurrPcieLinkGeneration", handle).pcie_gen_current

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: FakeCard) -> int:
        return self._enter("nvmlDeviceGetCurrPcieLinkWidth", handle).pcie_width_current

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: FakeCard) -> int:
        return self._enter("nvmlDeviceGetMaxPcieLinkGeneration", handle).pcie_gen_max

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: FakeCard) -> int:
        return self._enter("nvmlDeviceGetMaxPcieLinkWidth", handle).pcie_width_max

    def nvmlDeviceGetPcieReplayCounter(self, handle: FakeCard) -> int:
        card = self._enter("nvmlDeviceGetPcieReplayCounter", handle)
        return int(self._unsupported_if_none(card.pcie_replay_count))

    def nvmlDeviceGetP2PStatus(self, first: FakeCard, second: FakeCard, index: int) -> int:
        """The pair's read status; the call is counted (and can fail) on the first card."""
        self._enter("nvmlDeviceGetP2PStatus", first)
        if index != self.NVML_P2P_CAPS_INDEX_READ:
            raise self.NVMLError_InvalidArgument()
        pair = frozenset({self.cards.index(first), self.cards.index(second)})
        return self.p2p_pairs.get(pair, self.p2p_status)

    def nvmlDeviceGetUtilizationRates(self, handle: FakeCard) -> Any:
        card = self._enter("nvmlDeviceGetUtilizationRates", handle)
        rates = self.real.c_nvmlUtilization_t()
        rates.gpu = self._unsupported_if_none(card.utilization_gpu_pct)
        rates.memory = card.utilization_memory_pct
        return rates

    def nvmlDeviceGetPcieThroughput(self, handle: FakeCard, counter: int) -> int:
        card = self._enter("nvmlDeviceGetPcieThroughput", handle)
        if counter == self.NVML_PCIE_UTIL_TX_BYTES:
            return int(self._unsupported_if_none(card.pcie_tx_kib_s))
        if counter == self.NVML_PCIE_UTIL_RX_BYTES:
            return int(self._unsupported_if_none(card.pcie_rx_kib_s))
        raise self.NVMLError_InvalidArgument()

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeCard) -> list[Any]:
        """Friendly objects as the real module returns them (``usedGpuMemory`` None: N/A)."""
        card = self._enter("nvmlDeviceGetComputeRunningProcesses", handle)
        listed = []
        for pid, used in self._unsupported_if_none(card.processes):
            entry = self.real.c_nvmlProcessInfo_v3_t()
            entry.pid = pid
            entry.usedGpuMemory = used if used is not None else 0
            friendly = self.real.nvmlStructToFriendlyObject(entry)
            if used is None:
                friendly.usedGpuMemory = None
            listed.append(friendly)
        return listed

    def nvmlDeviceGetPersistenceMode(self, handle: FakeCard) -> int:
        card = self._enter("nvmlDeviceGetPersistenceMode", handle)
        enabled = card.persistence_enabled
        return int(self.NVML_FEATURE_ENABLED if enabled else self.NVML_FEATURE_DISABLED)

    def nvmlDeviceGetFieldValues(self, handle: FakeCard, field_ids: list[int]) -> Any:
        """Real ``c_nvmlFieldValue_t`` entries; a field the card lacks gets NotSupported."""
        card = self._enter("nvmlDeviceGetFieldValues", handle)
        known = {
            self.NVML_FI_DEV_MEMORY_TEMP: card.memory_temperature_c,
            self.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: card.recovery_action,
        }
        values = (self.real.c_nvmlFieldValue_t * len(field_ids))()
        for entry, field_id in zip(values, field_ids, strict=True):
            entry.fieldId = field_id
            value = known.get(field_id)
            if value is None:
                entry.nvmlReturn = self.NVML_ERROR_NOT_SUPPORTED
                continue
            entry.nvmlReturn = self.NVML_SUCCESS
            entry.valueType = self.NVML_VALUE_TYPE_UNSIGNED_INT
            entry.value.uiVal = value
        return values
