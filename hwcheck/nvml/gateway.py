"""The one way into NVML: loads ``pynvml``, and every NVML call goes through here.

This is the only module that touches ``pynvml`` (ruff's banned-api keeps it that way). It
follows nvitop's ``libnvml.py`` gateway (one place that loads and initialises the library,
lazily, under a lock, and through which every call goes), but it hands out typed results
instead of "N/A": each NVML error comes out as ``NvmlCallError`` with an ``NvmlError`` kind,
so the readers above it (``hwcheck.nvml.cards``, ``hwcheck.nvml.power``) can tell "not
supported" (normal on CMP cards) from "the GPU is lost" (an incident) without knowing
``pynvml``'s class names.

Every call runs on a worker thread with a time limit (see ``hwcheck.timed_calls``): a sick
GPU can block NVML for 45 s and a call into C cannot be cancelled, so the caller stops
waiting (``BackendTimeout``), and the call is remembered as stuck on that card until it has
returned, so the card is not called again meanwhile.
"""

from __future__ import annotations

import atexit
import enum
import importlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from hwcheck.backend import BackendError, BackendTimeout, BackendUnavailable
from hwcheck.hostfacts.model import P2pStatus
from hwcheck.nvml.calls import Call, Field
from hwcheck.nvml.errors import NvmlDown, nvml_unavailable
from hwcheck.timed_calls import CallTimedOut, TimedCaller, TooManyStuckCalls

logger = logging.getLogger(__name__)

# Every ``pynvml`` attribute this module reads; a test checks it against the source (an
# ``ast`` scan) and against the installed nvidia-ml-py, so a typo or an unlisted call fails.
NVML_NAMES_USED: tuple[str, ...] = (
    "NVMLError",
    "NVMLError_DriverNotLoaded",
    "NVMLError_FunctionNotFound",
    "NVMLError_GpuIsLost",
    "NVMLError_InvalidArgument",
    "NVMLError_LibRmVersionMismatch",
    "NVMLError_LibraryNotFound",
    "NVMLError_NoData",
    "NVMLError_NoPermission",
    "NVMLError_NotFound",
    "NVMLError_NotSupported",
    "NVMLError_ResetRequired",
    "NVMLError_Timeout",
    "NVMLError_Unknown",
    "NVML_CLOCK_MEM",
    "NVML_CLOCK_SM",
    "NVML_FEATURE_ENABLED",
    "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION",
    "NVML_FI_DEV_MEMORY_TEMP",
    "NVML_P2P_CAPS_INDEX_READ",
    "NVML_PCIE_UTIL_RX_BYTES",
    "NVML_PCIE_UTIL_TX_BYTES",
    "NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED",
    "NVML_P2P_STATUS_DISABLED_BY_REGKEY",
    "NVML_P2P_STATUS_GPU_NOT_SUPPORTED",
    "NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED",
    "NVML_P2P_STATUS_NOT_SUPPORTED",
    "NVML_P2P_STATUS_OK",
    "NVML_SUCCESS",
    "NVML_TEMPERATURE_GPU",
    "NVML_VALUE_TYPE_DOUBLE",
    "NVML_VALUE_TYPE_SIGNED_INT",
    "NVML_VALUE_TYPE_SIGNED_LONG_LONG",
    "NVML_VALUE_TYPE_UNSIGNED_INT",
    "NVML_VALUE_TYPE_UNSIGNED_LONG",
    "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG",
    "NVML_VALUE_TYPE_UNSIGNED_SHORT",
    "nvmlDeviceGetBAR1MemoryInfo",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetFanSpeed",
    "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetName",
    "nvmlDeviceGetP2PStatus",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetPcieReplayCounter",
    "nvmlDeviceGetPcieThroughput",
    "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetPowerManagementDefaultLimit",
    "nvmlDeviceGetPowerManagementLimit",
    "nvmlDeviceGetPowerManagementLimitConstraints",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetSerial",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetTemperatureV",
    "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetVbiosVersion",
    "nvmlDeviceSetPowerManagementLimit",
    "nvmlInit",
    "nvmlShutdown",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetNVMLVersion",
)

GPU_RECOVERY_ACTION_FIELD_ID = 230  # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION in R565+ headers
MODULE_MISSING_MESSAGE = (
    "NVML library not found: install nvidia-ml-py and the NVIDIA driver (libnvidia-ml.so.1)"
)
MODULE_MISSING_REMEDY = "pip install nvidia-ml-py in fleetd's environment; install the driver"


class NvmlError(enum.Enum):
    """The NVML error classes the readers tell apart (``OTHER``: any other ``NVMLError``)."""

    NOT_SUPPORTED = "not_supported"
    NOT_FOUND = "not_found"
    NO_DATA = "no_data"
    FUNCTION_NOT_FOUND = "function_not_found"
    GPU_IS_LOST = "gpu_is_lost"
    RESET_REQUIRED = "reset_required"
    UNKNOWN = "unknown"
    TIMEOUT = "timeout"
    NO_PERMISSION = "no_permission"
    INVALID_ARGUMENT = "invalid_argument"
    DRIVER_NOT_LOADED = "driver_not_loaded"
    LIBRARY_NOT_FOUND = "library_not_found"
    LIB_RM_VERSION_MISMATCH = "lib_rm_version_mismatch"
    OTHER = "other"

    @property
    def absent(self) -> bool:
        """The card or driver cannot report this reading: normal, the field is None."""
        return self in _ABSENT

    @property
    def lost(self) -> bool:
        """The card stopped answering: an incident."""
        return self in _LOST


_ABSENT = frozenset(
    {NvmlError.NOT_SUPPORTED, NvmlError.NOT_FOUND, NvmlError.NO_DATA, NvmlError.FUNCTION_NOT_FOUND}
)
_LOST = frozenset(
    {NvmlError.GPU_IS_LOST, NvmlError.RESET_REQUIRED, NvmlError.UNKNOWN, NvmlError.TIMEOUT}
)
_INIT_FAILURES = {
    NvmlError.DRIVER_NOT_LOADED: NvmlDown.DRIVER_NOT_LOADED,
    NvmlError.LIBRARY_NOT_FOUND: NvmlDown.LIBRARY_NOT_FOUND,
    NvmlError.LIB_RM_VERSION_MISMATCH: NvmlDown.LIB_RM_VERSION_MISMATCH,
    NvmlError.NO_PERMISSION: NvmlDown.NO_PERMISSION,
}


class NvmlCallError(Exception):
    """An NVML call failed; ``text`` is NVML's words plus the code, ``call`` the function."""

    def __init__(self, error: NvmlError, text: str, call: str) -> None:
        super().__init__(text)
        self.error = error
        self.text = text
        self.call = call


@dataclass(frozen=True, slots=True)
class StuckCall:
    """A call on a card that timed out and whose worker has not returned yet."""

    call: str
    timeout_s: float
    pending: Future[Any]

    def reason(self) -> str:
        """Why the card counts as lost while this call is stuck."""
        return f"NVML call {self.call} timed out after {self.timeout_s:g} s"


class NvmlGateway:
    """Loads and initialises NVML once, then runs every call with a time limit.

    ``nvml`` is the ``pynvml`` module (a fake in tests); ``import_module`` loads ``pynvml``
    when ``nvml`` is None, at first use, so the "module missing" path is testable.
    """

    def __init__(
        self,
        nvml: ModuleType | None,
        call_timeout_s: float,
        import_module: Callable[[str], ModuleType] = importlib.import_module,
        max_stuck_calls: int = 16,
    ) -> None:
        self._given = nvml
        self._import_module = import_module
        self._call_timeout_s = call_timeout_s
        self._caller = TimedCaller("nvml-call", max_stuck=max_stuck_calls)
        self._init_lock = threading.Lock()
        self._ready: ModuleType | None = None
        self._closed = False
        self._stuck_lock = threading.Lock()
        self._stuck: dict[int, StuckCall] = {}

    def open(self) -> None:
        """Load and initialise NVML once (first caller wins, the others wait on the lock)."""
        self._module()

    def call(self, card: int | None, call: Call, *args: Any) -> Any:
        """Run ``call`` (on ``card``, for the stuck-call record) and return its result.

        Raises ``NvmlCallError`` for an NVML error, ``BackendTimeout`` when the call does not
        return in time, ``BackendUnavailable`` when NVML cannot be used at all.
        """
        nvml = self._module()
        fn, bound_args = _bind(nvml, call)
        if fn is None:
            raise NvmlCallError(
                NvmlError.FUNCTION_NOT_FOUND,
                f"this pynvml has no call for {call.value}",
                call.value,
            )
        result = self._timed(card, nvml, fn, *args, *bound_args)
        if call is Call.PERSISTENCE_ENABLED:
            return result == nvml.NVML_FEATURE_ENABLED
        if call is Call.P2P_READ_STATUS:
            return _p2p_status(nvml, result)
        return result

    def field_value(self, card: int, handle: Any, field: Field) -> float | int | None:
        """One field of the field-values API; None when the driver does not know it."""
        nvml = self._module()
        if field is Field.MEMORY_TEMPERATURE:
            field_id = getattr(nvml, "NVML_FI_DEV_MEMORY_TEMP", None)
        else:  # older modules lack the constant, not the field
            field_id = getattr(
                nvml, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", GPU_RECOVERY_ACTION_FIELD_ID
            )
        if field_id is None:
            return None
        values = self._timed(card, nvml, nvml.nvmlDeviceGetFieldValues, handle, [int(field_id)])
        entry = values[0]
        if entry.nvmlReturn != nvml.NVML_SUCCESS:
            return None
        return _field_number(nvml, entry)

    def stuck_call(self, card: int) -> StuckCall | None:
        """The earlier call on ``card`` that has still not returned, if any."""
        with self._stuck_lock:
            stuck = self._stuck.get(card)
            if stuck is not None and stuck.pending.done():
                del self._stuck[card]
                return None
            return stuck

    def timeout_reason(self, card: int, exc: BackendTimeout) -> str:
        """Why a call on ``card`` timed out, naming the call that is stuck."""
        with self._stuck_lock:
            stuck = self._stuck.get(card)
        return stuck.reason() if stuck is not None else str(exc)

    def close(self) -> None:
        """Shut NVML down once; later calls raise ``BackendUnavailable``."""
        with self._init_lock:
            if self._closed:
                return
            self._closed = True
            nvml, self._ready = self._ready, None
        atexit.unregister(self.close)
        if nvml is not None:
            try:
                self._timed(None, nvml, nvml.nvmlShutdown)
            except BackendError as exc:
                logger.warning("NVML shutdown did not complete: %s", exc)
            except NvmlCallError as exc:
                logger.warning("NVML shutdown failed: %s", exc.text)
        self._caller.close()

    def _module(self) -> ModuleType:
        with self._init_lock:
            if self._closed:
                raise BackendUnavailable("the NVML backend was closed")
            if self._ready is not None:
                return self._ready
            nvml = self._load_module()
            try:
                self._timed(None, nvml, nvml.nvmlInit)
            except BackendTimeout as exc:
                raise nvml_unavailable(NvmlDown.NOT_ANSWERING, str(exc)) from exc
            except NvmlCallError as exc:
                down = _INIT_FAILURES.get(exc.error, NvmlDown.OTHER)
                raise nvml_unavailable(down, exc.text) from exc
            atexit.register(self.close)
            self._ready = nvml
            return nvml

    def _load_module(self) -> ModuleType:
        if self._given is not None:
            return self._given
        try:
            return self._import_module("pynvml")
        except ImportError as exc:
            raise BackendUnavailable(MODULE_MISSING_MESSAGE, remedy=MODULE_MISSING_REMEDY) from exc

    def _timed(self, card: int | None, nvml: ModuleType, fn: Callable[..., Any], *args: Any) -> Any:
        """Run one NVML call on the worker with the time limit (the only way to call)."""
        name = str(getattr(fn, "__name__", repr(fn)))
        try:
            return self._caller.call(lambda: fn(*args), self._call_timeout_s)
        except CallTimedOut as exc:
            where = "" if card is None else f" on card {card}"
            if card is not None:
                with self._stuck_lock:
                    self._stuck[card] = StuckCall(name, exc.timeout_s, exc.pending)
            raise BackendTimeout(
                f"NVML call {name}{where} timed out after {exc.timeout_s:g} s"
            ) from exc
        except TooManyStuckCalls as exc:
            raise nvml_unavailable(NvmlDown.NOT_ANSWERING, str(exc)) from exc
        except nvml.NVMLError as exc:
            raise NvmlCallError(_error_kind(nvml, exc), _error_text(exc), name) from exc


def _bind(nvml: ModuleType, call: Call) -> tuple[Callable[..., Any] | None, tuple[Any, ...]]:
    """The ``pynvml`` function behind ``call`` (None: this module lacks it) and its last args."""
    match call:
        case Call.DEVICE_COUNT:
            return nvml.nvmlDeviceGetCount, ()
        case Call.DRIVER_VERSION:
            return nvml.nvmlSystemGetDriverVersion, ()
        case Call.NVML_VERSION:
            return nvml.nvmlSystemGetNVMLVersion, ()
        case Call.HANDLE_BY_INDEX:
            return nvml.nvmlDeviceGetHandleByIndex, ()
        case Call.PCI_INFO:
            return nvml.nvmlDeviceGetPciInfo, ()
        case Call.UUID:
            return nvml.nvmlDeviceGetUUID, ()
        case Call.NAME:
            return nvml.nvmlDeviceGetName, ()
        case Call.SERIAL:
            return nvml.nvmlDeviceGetSerial, ()
        case Call.VBIOS_VERSION:
            return nvml.nvmlDeviceGetVbiosVersion, ()
        case Call.MEMORY_INFO:
            return nvml.nvmlDeviceGetMemoryInfo, ()
        case Call.POWER_USAGE:
            return nvml.nvmlDeviceGetPowerUsage, ()
        case Call.POWER_LIMIT:
            return nvml.nvmlDeviceGetPowerManagementLimit, ()
        case Call.ENFORCED_POWER_LIMIT:
            return nvml.nvmlDeviceGetEnforcedPowerLimit, ()
        case Call.DEFAULT_POWER_LIMIT:
            return nvml.nvmlDeviceGetPowerManagementDefaultLimit, ()
        case Call.POWER_LIMIT_CONSTRAINTS:
            return nvml.nvmlDeviceGetPowerManagementLimitConstraints, ()
        case Call.TOTAL_ENERGY:  # absent from old modules: then "not available"
            return getattr(nvml, "nvmlDeviceGetTotalEnergyConsumption", None), ()
        case Call.SET_POWER_LIMIT:
            return nvml.nvmlDeviceSetPowerManagementLimit, ()
        case Call.CLOCK_EVENT_REASONS:  # renamed from "throttle" reasons in newer modules
            return getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None), ()
        case Call.CLOCK_THROTTLE_REASONS:
            return getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None), ()
        case Call.SM_CLOCK:
            return nvml.nvmlDeviceGetClockInfo, (nvml.NVML_CLOCK_SM,)
        case Call.MEMORY_CLOCK:
            return nvml.nvmlDeviceGetClockInfo, (nvml.NVML_CLOCK_MEM,)
        case Call.TEMPERATURE:  # GetTemperature is deprecated for GetTemperatureV
            return getattr(nvml, "nvmlDeviceGetTemperature", None), (nvml.NVML_TEMPERATURE_GPU,)
        case Call.TEMPERATURE_V:
            return getattr(nvml, "nvmlDeviceGetTemperatureV", None), (nvml.NVML_TEMPERATURE_GPU,)
        case Call.FAN_SPEED:
            return nvml.nvmlDeviceGetFanSpeed, ()
        case Call.PCIE_GEN_CURRENT:
            return nvml.nvmlDeviceGetCurrPcieLinkGeneration, ()
        case Call.PCIE_WIDTH_CURRENT:
            return nvml.nvmlDeviceGetCurrPcieLinkWidth, ()
        case Call.PCIE_GEN_MAX:
            return nvml.nvmlDeviceGetMaxPcieLinkGeneration, ()
        case Call.PCIE_WIDTH_MAX:
            return nvml.nvmlDeviceGetMaxPcieLinkWidth, ()
        case Call.PERSISTENCE_ENABLED:
            return nvml.nvmlDeviceGetPersistenceMode, ()
        case Call.BAR1_MEMORY:
            return nvml.nvmlDeviceGetBAR1MemoryInfo, ()
        case Call.REMAPPED_ROWS:
            return getattr(nvml, "nvmlDeviceGetRemappedRows", None), ()
        case Call.SM_CLOCK_MAX:
            return nvml.nvmlDeviceGetMaxClockInfo, (nvml.NVML_CLOCK_SM,)
        case Call.MEMORY_CLOCK_MAX:
            return nvml.nvmlDeviceGetMaxClockInfo, (nvml.NVML_CLOCK_MEM,)
        case Call.PCIE_REPLAY_COUNTER:
            return nvml.nvmlDeviceGetPcieReplayCounter, ()
        case Call.P2P_READ_STATUS:
            return nvml.nvmlDeviceGetP2PStatus, (nvml.NVML_P2P_CAPS_INDEX_READ,)
        case Call.UTILIZATION_RATES:
            return nvml.nvmlDeviceGetUtilizationRates, ()
        case Call.PCIE_TX_THROUGHPUT:
            return nvml.nvmlDeviceGetPcieThroughput, (nvml.NVML_PCIE_UTIL_TX_BYTES,)
        case Call.PCIE_RX_THROUGHPUT:
            return nvml.nvmlDeviceGetPcieThroughput, (nvml.NVML_PCIE_UTIL_RX_BYTES,)
        case Call.COMPUTE_PROCESSES:
            return nvml.nvmlDeviceGetComputeRunningProcesses, ()
    raise AssertionError(call)  # pragma: no cover - the match covers every Call


def _error_kind(nvml: ModuleType, exc: Exception) -> NvmlError:
    classes = (
        (nvml.NVMLError_NotSupported, NvmlError.NOT_SUPPORTED),
        (nvml.NVMLError_NotFound, NvmlError.NOT_FOUND),
        (nvml.NVMLError_NoData, NvmlError.NO_DATA),
        (nvml.NVMLError_FunctionNotFound, NvmlError.FUNCTION_NOT_FOUND),
        (nvml.NVMLError_GpuIsLost, NvmlError.GPU_IS_LOST),
        (nvml.NVMLError_ResetRequired, NvmlError.RESET_REQUIRED),
        (nvml.NVMLError_Unknown, NvmlError.UNKNOWN),
        (nvml.NVMLError_Timeout, NvmlError.TIMEOUT),
        (nvml.NVMLError_NoPermission, NvmlError.NO_PERMISSION),
        (nvml.NVMLError_InvalidArgument, NvmlError.INVALID_ARGUMENT),
        (nvml.NVMLError_DriverNotLoaded, NvmlError.DRIVER_NOT_LOADED),
        (nvml.NVMLError_LibraryNotFound, NvmlError.LIBRARY_NOT_FOUND),
        (nvml.NVMLError_LibRmVersionMismatch, NvmlError.LIB_RM_VERSION_MISMATCH),
    )
    return next((kind for cls, kind in classes if isinstance(exc, cls)), NvmlError.OTHER)


def _p2p_status(nvml: ModuleType, code: int) -> P2pStatus:
    """NVML's P2P status code as a word ("not supported" is an answer, not an error)."""
    statuses = {
        nvml.NVML_P2P_STATUS_OK: P2pStatus.OK,
        nvml.NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED: P2pStatus.CHIPSET_NOT_SUPPORTED,
        nvml.NVML_P2P_STATUS_GPU_NOT_SUPPORTED: P2pStatus.GPU_NOT_SUPPORTED,
        nvml.NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED: P2pStatus.TOPOLOGY_NOT_SUPPORTED,
        nvml.NVML_P2P_STATUS_DISABLED_BY_REGKEY: P2pStatus.DISABLED_BY_REGKEY,
        nvml.NVML_P2P_STATUS_NOT_SUPPORTED: P2pStatus.NOT_SUPPORTED,
    }
    return statuses.get(int(code), P2pStatus.UNKNOWN)


def _error_text(exc: Exception) -> str:
    """``GPU is lost (NVML error 15)``: NVML's words plus the code, for logs and reasons."""
    code = getattr(exc, "value", None)
    return f"{exc} (NVML error {code})" if code is not None else str(exc)


def _field_number(nvml: ModuleType, entry: Any) -> float | int | None:
    """The number in an ``nvmlFieldValue_t``, read through the union member its type names."""
    value_type = entry.valueType
    value = entry.value
    if value_type == nvml.NVML_VALUE_TYPE_DOUBLE:
        return float(value.dVal)
    members = {
        nvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
        nvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
        nvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
        nvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
        nvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
        nvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
    }
    member = members.get(value_type)
    if member is None:
        logger.warning("NVML field %s has an unknown value type %s", entry.fieldId, value_type)
        return None
    return int(getattr(value, member))
